"""Empty trigger tables say how to fill them, pointing to a page that exists."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def test_empty_schedules_routes_subscriptions_and_credentials_say_how_to_add_one(operator: Client) -> None:
    schedules = operator.get("/schedules/").content.decode()
    routes = operator.get("/routes/").content.decode()
    assert 'id="schedules-empty"' in schedules and 'href="/schedules/new/"' in schedules
    assert 'id="routes-empty"' in routes and 'href="/routes/new/"' in routes
    assert 'id="subscriptions-empty"' in routes and 'href="/admin/triggers/subscription/add/"' in routes
    assert 'id="credentials-empty"' in routes and "ingress_secret_create" in routes
    admin = Client()
    assert admin.login(username="admin", password="admin")
    assert admin.get("/admin/triggers/subscription/add/").status_code == 200
