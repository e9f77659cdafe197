"""/api/routes, /api/subscriptions and /api/ingress-credentials: the same reads and writes as
the pages, JSON errors, and rotation's secret in its own answer only."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.models import AuditEntry
from ingest.triggers.models import Route
from ingest.triggers.services import (
    event_publish,
    ingress_secret_create,
    route_upsert,
    subscription_create,
)
from tests.api.conftest import ApiClient
from tests.triggers.support import signed_post

pytestmark = [pytest.mark.db, pytest.mark.django_db]


@pytest.fixture
def acme(db: Any) -> dict[str, Any]:
    _, token, secret = ingress_secret_create(tenant="acme")
    route_upsert(name="orders", workflow="test-echo", tenant="acme")
    sub = subscription_create(workflow="test-echo", pattern="user.*", tenant="acme")
    return {"token": token, "secret": secret, "sub": sub}


def test_routes_list_their_deliveries_and_outcome(operator: ApiClient, acme: dict[str, Any]) -> None:
    started = signed_post(Client(), "orders", {"n": 1}, token=acme["token"], secret=acme["secret"]).json()
    routes = operator.get("/api/routes").json()
    assert [r["name"] for r in routes] == ["orders"]
    assert routes[0]["deliveries"][0] == {
        **routes[0]["deliveries"][0],
        "instance_id": started["instance_id"],
        "status": "queued",
    }
    detail = operator.get("/api/routes/orders/detail").json()
    assert detail["workflow"] == "test-echo" and detail["coalesce"] == {}


def test_subscriptions_list_the_events_they_started(operator: ApiClient, acme: dict[str, Any]) -> None:
    published = event_publish(type="user.created", data={}, tenant="acme", now=timezone.now())
    sub = operator.get(f"/api/subscriptions/{acme['sub'].pk}").json()
    assert [(d["event_id"], d["instance_id"]) for d in sub["deliveries"]] == [
        (published.event_id, published.started[0])
    ]


def test_coalesce_is_validated_and_a_refusal_changes_nothing(operator: ApiClient, acme: dict[str, Any]) -> None:
    bad = operator.put("/api/routes/orders/coalesce", {"coalesce": {"debounce": {"key": "a"}}})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_coalesce"
    assert "needs a period" in bad.json()["error"]["message"]
    assert Route.objects.get(name="orders").coalesce == {} and not AuditEntry.objects.exists()
    setting = {"debounce": {"key": "account", "period": "30 seconds"}}
    ok = operator.put("/api/routes/orders/coalesce", {"coalesce": setting})
    assert ok.status_code == 200 and ok.json()["coalesce"] == setting
    off = operator.put(f"/api/subscriptions/{acme['sub'].pk}/coalesce", {"coalesce": None})
    assert off.status_code == 200 and off.json()["coalesce"] == {}


def test_rotation_answers_the_new_pair_once_and_lists_only_prefixes(operator: ApiClient, acme: dict[str, Any]) -> None:
    rotated = operator.post("/api/ingress-credentials/acme/default/rotate", {"reason": "leaked", "overlap_seconds": 0})
    assert rotated.status_code == 200 and rotated["Cache-Control"] == "no-store"
    pair = rotated.json()
    listed = operator.get("/api/ingress-credentials")
    assert listed.json()[0]["token_prefix"] == pair["token"][:10]
    assert pair["token"] not in listed.content.decode() and pair["secret"] not in listed.content.decode()
    assert signed_post(Client(), "orders", {}, token=pair["token"], secret=pair["secret"]).status_code in (201, 202)
    assert signed_post(Client(), "orders", {}, token=acme["token"], secret=acme["secret"]).status_code == 401


def test_viewer_and_stranger_get_json_errors_and_change_nothing(
    viewer: ApiClient, stranger: ApiClient, acme: dict[str, Any]
) -> None:
    forbidden = viewer.post("/api/ingress-credentials/acme/default/rotate", {"reason": "x"})
    assert forbidden.status_code == 403 and forbidden.json()["error"]["code"] == "forbidden"
    assert viewer.put("/api/routes/orders/coalesce", {"coalesce": None}).status_code == 403
    assert viewer.get("/api/routes").json()[0]["name"] == "orders"
    hidden = stranger.get("/api/routes/orders/detail")
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "route_not_found"
    assert stranger.get("/api/routes").json() == [] and stranger.get("/api/subscriptions").json() == []
    assert stranger.post("/api/ingress-credentials/acme/default/rotate", {"reason": "x"}).status_code == 404
    assert not AuditEntry.objects.exists()
    assert signed_post(Client(), "orders", {}, token=acme["token"], secret=acme["secret"]).status_code in (201, 202)


def test_without_a_token_the_answer_is_a_json_401() -> None:
    answer = Client().get("/api/routes")
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "not_authenticated"
