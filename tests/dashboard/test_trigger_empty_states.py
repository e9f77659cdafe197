"""Empty trigger tables say how to fill them, pointing to a console page that exists (no shell,
no admin)."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def test_empty_schedules_routes_subscriptions_and_credentials_say_how_to_add_one(operator: Client) -> None:
    schedules = operator.get("/schedules/").content.decode()
    routes = operator.get("/routes/").content.decode()
    assert 'id="schedules-empty"' in schedules and 'href="/schedules/new/"' in schedules
    assert 'id="routes-empty"' in routes and 'href="/routes/new/"' in routes
    empty_subscriptions = routes.split('id="subscriptions-empty"')[1].split("</td>")[0]
    assert 'href="/subscriptions/new/"' in empty_subscriptions and "admin" not in empty_subscriptions
    empty_credentials = routes.split('id="credentials-empty"')[1].split("</td>")[0]
    assert 'href="/credentials/new/"' in empty_credentials and "ingress_secret_create" not in empty_credentials
    for page in ("/subscriptions/new/", "/credentials/new/"):
        assert operator.get(page).status_code == 200
