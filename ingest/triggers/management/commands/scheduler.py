"""`python manage.py scheduler`: run the cron scheduler (one leader across every process)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone

from ingest.triggers.scheduler import Scheduler


class Command(BaseCommand):
    help = "Fire cron schedules. Start one per machine; a PostgreSQL advisory lock elects a leader."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between ticks")
        parser.add_argument("--once", action="store_true", help="tick once and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        scheduler = Scheduler(interval=options["interval"])
        if options["once"]:
            fired = scheduler.tick(timezone.now())
            scheduler.resign()
            self.stdout.write(f"fired {len(fired)}: {' '.join(fired)}")
            return
        self.stdout.write("scheduler running; Ctrl-C stops it")
        scheduler.run_until_signalled()
