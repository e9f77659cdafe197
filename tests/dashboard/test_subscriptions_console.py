"""Subscriptions created, edited, enabled, disabled and deleted in the console, as routes and
schedules are: every wrong field named at once in one 400 that changes nothing, a created one
starts its workflow for a matching event, a deletion asks first; audited; a subscription for
every tenant is staff's; the viewer and the stranger cannot."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.models import AuditEntry
from ingest.triggers.models import Subscription
from ingest.triggers.services import event_publish, subscription_create
from tests.triggers import support  # noqa: F401  (registers test-echo)

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def _new(**overrides: str) -> dict[str, str]:
    return {
        "pattern": "user.*",
        "workflow": "test-echo",
        "tenant": "acme",
        "filters": '{"plan": "pro"}',
        "enabled": "on",
        **overrides,
    }


def _publish(type: str, **data: Any) -> list[str]:
    return event_publish(type=type, data=data, tenant="acme", now=timezone.now()).started


def test_an_operator_creates_a_subscription_that_starts_its_workflow(operator: Client) -> None:
    listing = operator.get("/routes/").content.decode()
    assert 'href="/subscriptions/new/"' in listing
    form = operator.get("/subscriptions/new/").content.decode()
    assert 'value="acme"' in form and 'value="initech"' not in form and '<option value="">' not in form
    response = operator.post("/subscriptions/new/create/", _new())
    sub = Subscription.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/subscriptions/{sub.pk}/"
    assert (sub.pattern, sub.workflow, sub.tenant, sub.filters, sub.enabled) == (
        "user.*",
        "test-echo",
        "acme",
        {"plan": "pro"},
        True,
    )
    assert len(_publish("user.created", plan="pro")) == 1 and _publish("user.created", plan="free") == []
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.actor, entry.tenants, entry.source) == (
        "subscription.create",
        "operator",
        ["acme"],
        "web",
    )


def test_every_invalid_field_is_named_at_once_and_nothing_is_created(operator: Client) -> None:
    response = operator.post(
        "/subscriptions/new/create/",
        _new(pattern="has space", workflow="nope", tenant="initech", filters='{"plan": {"a": 1}}'),
    )
    assert response.status_code == 400
    assert set(response.context["form"].errors) == {"pattern", "workflow", "tenant", "filters"}
    assert "4 fields to correct" in response.content.decode()
    not_json = operator.post("/subscriptions/new/create/", _new(filters="{oops", pattern=""))
    assert set(not_json.context["form"].errors) == {"filters", "pattern"}
    assert not Subscription.objects.exists() and not AuditEntry.objects.exists()


def test_an_edit_and_a_switch_take_effect_for_the_next_event_and_a_bad_edit_changes_nothing(operator: Client) -> None:
    sub = subscription_create(workflow="test-echo", pattern="user.*", tenant="acme")
    page = operator.get(f"/subscriptions/{sub.pk}/").content.decode()
    assert "Save subscription" in page and "Disable" in page and "Delete…" in page
    before = Subscription.objects.filter(pk=sub.pk).values().get()
    refused = operator.post(
        f"/subscriptions/{sub.pk}/save/", {"pattern": "a b", "workflow": "nope", "filters": "[1]", "enabled": "on"}
    )
    assert refused.status_code == 400 and set(refused.context["edit"].errors) == {"pattern", "workflow", "filters"}
    assert Subscription.objects.filter(pk=sub.pk).values().get() == before
    saved = operator.post(
        f"/subscriptions/{sub.pk}/save/",
        {"pattern": "invoice.*", "workflow": "test-echo", "filters": "", "enabled": "on"},
    )
    assert saved.status_code == 302 and _publish("user.created") == [] and len(_publish("invoice.paid")) == 1
    assert operator.post(f"/subscriptions/{sub.pk}/disable/").status_code == 302
    assert _publish("invoice.sent") == []
    assert operator.post(f"/subscriptions/{sub.pk}/enable/").status_code == 302
    assert len(_publish("invoice.void")) == 1
    assert list(AuditEntry.objects.order_by("id").values_list("action", flat=True)) == [
        "subscription.update",
        "subscription.disable",
        "subscription.enable",
    ]


def test_delete_asks_first_then_the_subscription_starts_nothing(operator: Client) -> None:
    sub = subscription_create(workflow="test-echo", pattern="user.*", tenant="acme")
    confirm = operator.get(f"/subscriptions/{sub.pk}/delete/")
    assert confirm.status_code == 200 and "Delete subscription" in confirm.content.decode()
    assert operator.get(f"/subscriptions/{sub.pk}/delete/run/").status_code == 405
    assert Subscription.objects.exists()
    assert operator.post(f"/subscriptions/{sub.pk}/delete/run/").status_code == 302
    assert not Subscription.objects.exists() and _publish("user.created") == []
    assert AuditEntry.objects.get().selection == {"subscription": sub.pk, "pattern": "user.*", "workflow": "test-echo"}


def test_a_subscription_for_every_tenant_is_made_by_staff_only(operator: Client, users: Any) -> None:
    refused = operator.post("/subscriptions/new/create/", _new(tenant=""))
    assert refused.status_code == 400 and "tenant" in refused.context["form"].errors
    admin = Client()
    assert admin.login(username="admin", password="admin")
    assert '<option value="">every tenant</option>' in admin.get("/subscriptions/new/").content.decode()
    assert admin.post("/subscriptions/new/create/", _new(tenant="", filters="")).status_code == 302
    assert Subscription.objects.get().tenant == "" and AuditEntry.objects.get().tenants == []
    everyone = Subscription.objects.get()
    assert operator.post(f"/subscriptions/{everyone.pk}/disable/").status_code == 404  # not staff: not visible


def test_a_viewer_and_a_stranger_can_neither_create_edit_switch_nor_delete(viewer: Client, stranger: Client) -> None:
    sub = subscription_create(workflow="test-echo", pattern="user.*", tenant="acme")
    before = list(Subscription.objects.values())
    assert 'href="/subscriptions/new/"' not in viewer.get("/routes/").content.decode()
    assert "Save subscription" not in viewer.get(f"/subscriptions/{sub.pk}/").content.decode()
    assert viewer.get("/subscriptions/new/").status_code == 403
    for path in ("save/", "disable/", "delete/run/"):
        assert viewer.post(f"/subscriptions/{sub.pk}/{path}", _new()).status_code == 403, path
        assert stranger.post(f"/subscriptions/{sub.pk}/{path}", _new()).status_code == 404, path
    assert stranger.post("/subscriptions/new/create/", _new()).status_code == 400  # acme: not a choice
    assert list(Subscription.objects.values()) == before and not AuditEntry.objects.exists()
