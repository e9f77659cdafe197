"""Empty trigger tables say how to fill them, pointing to a page that exists."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def test_empty_schedules_routes_subscriptions_and_credentials_say_how_to_add_one(operator: Client) -> None:
    schedules = operator.get("/schedules/").content.decode()
    routes = operator.get("/routes/").content.decode()
    assert 'id="schedules-empty"' in schedules and 'href="/schedules/new/"' in schedules
    assert 'id="routes-empty"' in routes and 'href="/admin/triggers/route/add/"' in routes
    assert 'id="subscriptions-empty"' in routes and 'href="/admin/triggers/subscription/add/"' in routes
    assert 'id="credentials-empty"' in routes and "ingress_secret_create" in routes
    admin = Client()
    assert admin.login(username="admin", password="admin")
    for path in ("/admin/triggers/route/add/", "/admin/triggers/subscription/add/"):
        assert admin.get(path).status_code == 200, path
