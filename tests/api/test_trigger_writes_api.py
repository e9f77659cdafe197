"""Routes, schedules and subscriptions created, edited, enabled, disabled and deleted over the REST
API: every invalid field named at once in one JSON 400 that changes no row and writes no audit
entry, the console's form refusing the same input with the same messages, each change audited,
and the three personas' sides."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.access import demo_users_ensure
from dashboard.models import AuditEntry
from ingest.triggers.models import Route, Schedule, Subscription
from ingest.triggers.services import (
    event_publish,
    ingress_secret_create,
    route_upsert,
    subscription_create,
)
from tests.api.conftest import ApiClient, persona
from tests.triggers.support import signed_post

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def send(client: ApiClient, method: str, path: str, body: Any = None) -> Any:
    return client.client.generic(
        method, path, "" if body is None else json.dumps(body), content_type="application/json", headers=client.headers
    )


def snapshot() -> tuple[list[Any], ...]:
    return (
        list(Route.objects.values()),
        list(Schedule.objects.values()),
        list(Subscription.objects.values()),
        list(AuditEntry.objects.values()),
    )


ROUTE = {"name": "orders", "tenant": "acme", "workflow": "test-echo", "rate_limit_per_minute": 60, "priority": 5}
BAD_ROUTE = {
    "name": "has space",
    "tenant": "acme",
    "workflow": "no-such-flow",
    "wait_seconds": 0,
    "rate_limit_per_minute": -1,
    "idempotency_ttl_seconds": 5,
    "priority": "high",
    "enabled": "yes",
}


def test_a_route_is_created_edited_disabled_enabled_and_deleted_each_audited(operator: ApiClient) -> None:
    created = operator.post("/api/routes", ROUTE)
    assert created.status_code == 201, created.content
    assert created.json() | ROUTE == created.json() and created.json()["enabled"] is True
    _, token, secret = ingress_secret_create(tenant="acme")
    assert signed_post(Client(), "orders", {"n": 1}, token=token, secret=secret).status_code == 202
    edited = send(operator, "PATCH", "/api/routes/orders/detail", {"priority": 7, "rate_limit_per_minute": None})
    assert edited.status_code == 200 and (edited.json()["priority"], edited.json()["rate_limit_per_minute"]) == (
        7,
        None,
    )
    assert operator.post("/api/routes/orders/disable").json()["enabled"] is False
    assert signed_post(Client(), "orders", {"n": 2}, token=token, secret=secret).status_code == 409
    assert operator.post("/api/routes/orders/enable").json()["enabled"] is True
    gone = send(operator, "DELETE", "/api/routes/orders/detail")
    assert gone.status_code == 200 and gone.json() == {"name": "orders", "deleted": True}
    assert signed_post(Client(), "orders", {"n": 3}, token=token, secret=secret).status_code == 404
    assert list(AuditEntry.objects.order_by("id").values_list("action", "source", "tenants")) == [
        (f"route.{a}", "api", ["acme"]) for a in ("create", "update", "disable", "enable", "delete")
    ]


def test_every_invalid_route_field_is_named_at_once_as_the_console_names_it(operator: ApiClient) -> None:
    before = snapshot()
    answer = operator.post("/api/routes", BAD_ROUTE)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_route"
    fields = answer.json()["error"]["fields"]
    assert set(fields) == {
        "name",
        "workflow",
        "wait_seconds",
        "rate_limit_per_minute",
        "idempotency_ttl_seconds",
        "priority",
        "enabled",
    }
    assert snapshot() == before
    demo_users_ensure()
    console = Client()
    assert console.login(username="operator", password="operator")
    form = console.post("/routes/new/create/", {**BAD_ROUTE, "priority": "5000", "enabled": "on"}).context["form"]
    for field in ("name", "wait_seconds", "rate_limit_per_minute", "idempotency_ttl_seconds"):
        assert form.errors[field] == [fields[field]], field
    edit = send(operator, "PATCH", "/api/routes/none-such/detail", {"priority": 1})
    assert edit.status_code == 404 and edit.json()["error"]["code"] == "route_not_found"


def test_a_taken_route_name_alone_is_a_409_and_with_other_problems_one_of_them(operator: ApiClient) -> None:
    route_upsert(name="orders", workflow="test-echo", tenant="acme")
    taken = operator.post("/api/routes", ROUTE)
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "route_exists"
    both = operator.post("/api/routes", {**ROUTE, "priority": 5000})
    assert both.status_code == 400 and set(both.json()["error"]["fields"]) == {"name", "priority"}
    nothing = send(operator, "PATCH", "/api/routes/orders/detail", {})
    assert nothing.status_code == 400 and nothing.json()["error"]["code"] == "nothing_to_change"
    assert Route.objects.get().priority == 0 and not AuditEntry.objects.exists()


def test_a_schedule_is_created_edited_and_deleted_and_a_bad_one_names_every_field(operator: ApiClient) -> None:
    before = snapshot()
    bad = operator.post(
        "/api/schedules",
        {
            "name": "new",
            "tenant": "acme",
            "workflow": "test-echo",
            "cron": "61 * * *",
            "timezone": "Mars/Olympus",
            "catch_up_limit": 0,
            "params": {"_event": 1},
            "missed_fire_policy": "later",
        },
    )
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_schedule"
    assert set(bad.json()["error"]["fields"]) == {
        "name",
        "cron",
        "timezone",
        "catch_up_limit",
        "params",
        "missed_fire_policy",
    }
    assert snapshot() == before
    created = operator.post(
        "/api/schedules",
        {
            "name": "month-end",
            "tenant": "acme",
            "workflow": "test-echo",
            "cron": "59 23 LW * *",
            "timezone": "Europe/Paris",
            "params": {"n": 1},
            "catch_up_limit": 2.0,
        },
    )
    assert created.status_code == 201 and len(created.json()["next_fires"]) == 5
    assert Schedule.objects.get().catch_up_limit == 2
    assert (
        operator.post(
            "/api/schedules", {"name": "month-end", "tenant": "acme", "workflow": "test-echo", "cron": "0 3 * * *"}
        ).status_code
        == 409
    )
    assert send(operator, "PATCH", "/api/schedules/month-end", {"enabled": False}).json()["next_fires"] == []
    assert send(operator, "DELETE", "/api/schedules/month-end").json() == {"name": "month-end", "deleted": True}
    assert not Schedule.objects.exists()
    assert list(AuditEntry.objects.order_by("id").values_list("action", flat=True)) == [
        "schedule.create",
        "schedule.update",
        "schedule.delete",
    ]


def test_a_subscription_is_created_edited_switched_and_deleted_and_starts_what_it_says(operator: ApiClient) -> None:
    created = operator.post(
        "/api/subscriptions",
        {"tenant": "acme", "pattern": "user.*", "workflow": "test-echo", "filters": {"plan": ["pro", "team"]}},
    )
    assert created.status_code == 201, created.content
    sub_id = created.json()["id"]
    started = event_publish(type="user.created", data={"plan": "pro"}, tenant="acme", now=timezone.now()).started
    assert len(started) == 1
    edited = send(operator, "PATCH", f"/api/subscriptions/{sub_id}", {"pattern": "invoice.*"})
    assert edited.status_code == 200 and edited.json()["pattern"] == "invoice.*"
    assert operator.post(f"/api/subscriptions/{sub_id}/disable").json()["enabled"] is False
    assert event_publish(type="invoice.paid", data={"plan": "pro"}, tenant="acme", now=timezone.now()).started == []
    assert operator.post(f"/api/subscriptions/{sub_id}/enable").json()["enabled"] is True
    assert send(operator, "DELETE", f"/api/subscriptions/{sub_id}").json() == {"id": sub_id, "deleted": True}
    assert not Subscription.objects.exists()
    assert list(AuditEntry.objects.order_by("id").values_list("action", flat=True)) == [
        f"subscription.{a}" for a in ("create", "update", "disable", "enable", "delete")
    ]


def test_every_invalid_subscription_field_is_named_at_once(operator: ApiClient) -> None:
    sub = subscription_create(workflow="test-echo", pattern="user.*", tenant="acme")
    before = snapshot()
    bad = operator.post(
        "/api/subscriptions",
        {
            "tenant": "acme",
            "pattern": "has space",
            "workflow": "nope",
            "filters": {"plan": {"nested": 1}},
            "enabled": 1,
            "coalesce": {"debounce": {"key": "a"}},
        },
    )
    assert bad.status_code == 400 and set(bad.json()["error"]["fields"]) == {
        "pattern",
        "workflow",
        "filters",
        "enabled",
        "coalesce",
    }
    edit = send(operator, "PATCH", f"/api/subscriptions/{sub.pk}", {"pattern": "", "filters": []})
    assert edit.status_code == 400 and set(edit.json()["error"]["fields"]) == {"pattern", "filters"}
    assert snapshot() == before


def test_tenants_bound_every_write(viewer: ApiClient, stranger: ApiClient, operator: ApiClient) -> None:
    route_upsert(name="orders", workflow="test-echo", tenant="acme")
    sub = subscription_create(workflow="test-echo", pattern="user.*", tenant="acme")
    everyone = subscription_create(workflow="test-echo", pattern="audit.*", tenant="")
    before = snapshot()
    assert viewer.post("/api/routes", ROUTE | {"name": "other"}).status_code == 403
    assert viewer.post("/api/routes/orders/disable").status_code == 403
    assert stranger.post("/api/routes", ROUTE | {"name": "other"}).json()["error"]["code"] == "tenant_not_found"
    for method, path in (
        ("POST", "/api/routes/orders/disable"),
        ("PATCH", "/api/routes/orders/detail"),
        ("DELETE", "/api/routes/orders/detail"),
        ("POST", f"/api/subscriptions/{sub.pk}/disable"),
        ("DELETE", f"/api/subscriptions/{sub.pk}"),
    ):
        assert send(stranger, method, path, {"priority": 1} if method == "PATCH" else None).status_code == 404, path
    assert stranger.get("/api/routes").json() == [] and stranger.get("/api/subscriptions").json() == []
    # One for every tenant's events: staff only, whoever operates.
    assert (
        operator.post("/api/subscriptions", {"tenant": "", "pattern": "x.*", "workflow": "test-echo"}).status_code
        == 403
    )
    assert operator.post(f"/api/subscriptions/{everyone.pk}/disable").status_code == 404
    assert snapshot() == before
    admin = persona("staff-op", [("acme", "operator")], staff=True)
    assert admin.post(f"/api/subscriptions/{everyone.pk}/disable").json()["enabled"] is False
    assert AuditEntry.objects.get().tenants == []


@pytest.mark.parametrize(
    "path, body, fields",
    [
        (
            "/api/schedules",
            {"name": None, "tenant": None, "workflow": "test-echo", "cron": "@daily", "params": None},
            {"name", "tenant", "params"},
        ),
        (
            "/api/routes",
            {"name": None, "tenant": None, "workflow": "test-echo", "description": None},
            {"name", "tenant", "description"},
        ),
        (
            "/api/subscriptions",
            {"tenant": None, "pattern": "user.*", "workflow": "test-echo", "filters": None, "coalesce": ""},
            {"tenant", "filters", "coalesce"},
        ),
        ("/api/ingress-credentials", {"tenant": None, "name": None}, {"tenant", "name"}),
    ],
)
def test_null_is_a_value_the_checks_refuse_not_a_field_left_out(
    operator: ApiClient, path: str, body: dict[str, Any], fields: set[str]
) -> None:
    """What the schema fuzz found: a null tenant passed the check meant for "not given" and the
    insert failed with a 500."""
    before = snapshot()
    answer = operator.post(path, body)
    assert answer.status_code == 400 and set(answer.json()["error"]["fields"]) == fields, answer.content
    assert snapshot() == before
