"""`manage.py demo_users`: the demo personas (operator/operator, viewer/viewer, stranger/stranger, admin/admin)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from dashboard.access import DEMO_USERS, demo_users_ensure


class Command(BaseCommand):
    help = "Create or reset the demo users and their tenant memberships (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        demo_users_ensure()
        for spec in DEMO_USERS:
            tenants = ", ".join(f"{t} ({r})" for t, r in spec["memberships"])
            self.stdout.write(f"{spec['username']}/{spec['password']}: {tenants}")
