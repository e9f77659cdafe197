"""Routes created, edited and deleted in the console: every wrong field named at once in one 400
that changes nothing; a created route starts its workflow for a signed request, an edit takes
effect on the next request, a deletion (after a confirmation) makes the route a 404; audited;
the viewer and the stranger cannot."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from dashboard.models import AuditEntry
from ingest.triggers.models import Route
from ingest.triggers.services import ingress_secret_create, route_upsert
from tests.triggers.support import signed_post

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def _route(**overrides: str) -> dict[str, str]:
    return {
        "name": "orders",
        "tenant": "acme",
        "workflow": "test-echo",
        "enabled": "on",
        "wait_seconds": "30",
        "rate_limit_per_minute": "",
        "idempotency_ttl_seconds": "86400",
        "priority": "0",
        "description": "the shop's order webhook",
        **overrides,
    }


def _settings(**overrides: str) -> dict[str, str]:
    data = _route(**overrides)
    data.pop("name")
    data.pop("tenant")
    return data


def test_an_operator_creates_a_route_that_starts_its_workflow(operator: Client) -> None:
    assert 'href="/routes/new/"' in operator.get("/routes/").content.decode()
    form = operator.get("/routes/new/").content.decode()
    assert form.count("A route starts its workflow for each signed POST /api/routes/&lt;name&gt;, with") == 1
    response = operator.post("/routes/new/create/", _route())
    assert response.status_code == 302 and response["Location"] == "/routes/orders/"
    route = Route.objects.get(name="orders")
    assert (route.workflow, route.tenant, route.enabled, route.description) == (
        "test-echo",
        "acme",
        True,
        "the shop's order webhook",
    )
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.tenants, entry.selection["route"]) == ("route.create", ["acme"], "orders")
    _, token, secret = ingress_secret_create(tenant="acme")
    assert signed_post(Client(), "orders", {"n": 1}, token=token, secret=secret).status_code == 202


def test_every_invalid_field_is_named_at_once_and_nothing_is_created(operator: Client) -> None:
    route_upsert(name="taken", workflow="test-echo", tenant="acme")
    response = operator.post(
        "/routes/new/create/",
        _route(
            name="taken",
            tenant="initech",
            workflow="no-such-flow",
            wait_seconds="0",
            rate_limit_per_minute="-1",
            idempotency_ttl_seconds="5",
            priority="5000",
        ),
    )
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert set(errors) == {
        "name",
        "tenant",
        "workflow",
        "wait_seconds",
        "rate_limit_per_minute",
        "idempotency_ttl_seconds",
        "priority",
    }
    assert "7 fields to correct" in response.content.decode()
    bad_name = operator.post("/routes/new/create/", _route(name="has space", wait_seconds="0"))
    assert set(bad_name.context["form"].errors) == {"name", "wait_seconds"}
    assert list(Route.objects.values_list("name", flat=True)) == ["taken"] and not AuditEntry.objects.exists()


def test_an_edit_takes_effect_on_the_next_request_and_a_bad_one_changes_nothing(operator: Client) -> None:
    route_upsert(name="orders", workflow="test-echo", tenant="acme")
    _, token, secret = ingress_secret_create(tenant="acme")
    assert signed_post(Client(), "orders", {"n": 1}, token=token, secret=secret).status_code == 202
    before = Route.objects.filter(name="orders").values().get()
    refused = operator.post("/routes/orders/save/", _settings(workflow="nope", priority="x", wait_seconds="9999"))
    assert refused.status_code == 400
    assert set(refused.context["edit"].errors) == {"workflow", "priority", "wait_seconds"}
    assert Route.objects.filter(name="orders").values().get() == before
    saved = operator.post("/routes/orders/save/", {k: v for k, v in _settings().items() if k != "enabled"})
    assert saved.status_code == 302 and Route.objects.get(name="orders").enabled is False
    assert signed_post(Client(), "orders", {"n": 2}, token=token, secret=secret).status_code == 409
    assert AuditEntry.objects.get().action == "route.update"


def test_delete_asks_first_then_the_route_is_a_404(operator: Client) -> None:
    route_upsert(name="orders", workflow="test-echo", tenant="acme")
    _, token, secret = ingress_secret_create(tenant="acme")
    confirm = operator.get("/routes/orders/delete/")
    assert confirm.status_code == 200 and "Delete route" in confirm.content.decode()
    assert Route.objects.filter(name="orders").exists()
    assert operator.post("/routes/orders/delete/run/").status_code == 302
    assert not Route.objects.filter(name="orders").exists()
    assert signed_post(Client(), "orders", {"n": 1}, token=token, secret=secret).status_code == 404
    assert AuditEntry.objects.get().action == "route.delete"


def test_a_viewer_and_a_stranger_can_neither_create_edit_nor_delete(
    viewer: Client, stranger: Client, users: Any
) -> None:
    route_upsert(name="orders", workflow="test-echo", tenant="acme")
    before = Route.objects.filter(name="orders").values().get()
    assert 'href="/routes/new/"' not in viewer.get("/routes/").content.decode()
    assert viewer.get("/routes/new/").status_code == 403
    assert viewer.post("/routes/new/create/", _route(name="other")).status_code == 403
    assert viewer.post("/routes/orders/save/", _settings()).status_code == 403
    assert viewer.post("/routes/orders/delete/run/").status_code == 403
    assert stranger.post("/routes/new/create/", _route(name="other")).status_code == 400  # acme: not a choice
    assert stranger.post("/routes/orders/save/", _settings()).status_code == 404
    assert stranger.post("/routes/orders/delete/run/").status_code == 404
    assert list(Route.objects.values()) == [before] and not AuditEntry.objects.exists()


def test_enable_and_disable_from_the_list_and_the_page_take_effect_on_the_next_request(operator: Client) -> None:
    route_upsert(name="orders", workflow="test-echo", tenant="acme")
    _, token, secret = ingress_secret_create(tenant="acme")
    assert 'action="/routes/orders/disable/"' in operator.get("/routes/").content.decode()
    listed = operator.post("/routes/orders/disable/", {"next": "list"})
    assert listed.status_code == 302 and listed["Location"] == "/routes/"
    assert signed_post(Client(), "orders", {"n": 1}, token=token, secret=secret).status_code == 409
    assert 'action="/routes/orders/enable/"' in operator.get("/routes/orders/").content.decode()
    again = operator.post("/routes/orders/enable/")
    assert again.status_code == 302 and again["Location"] == "/routes/orders/"
    assert signed_post(Client(), "orders", {"n": 2}, token=token, secret=secret).status_code == 202
    assert list(AuditEntry.objects.order_by("id").values_list("action", flat=True)) == ["route.disable", "route.enable"]


def test_a_viewer_and_a_stranger_cannot_switch_a_route(viewer: Client, stranger: Client, users: Any) -> None:
    route_upsert(name="orders", workflow="test-echo", tenant="acme")
    assert "/routes/orders/disable/" not in viewer.get("/routes/").content.decode()
    assert viewer.post("/routes/orders/disable/").status_code == 403
    assert stranger.post("/routes/orders/disable/").status_code == 404
    assert Route.objects.get().enabled is True and not AuditEntry.objects.exists()
