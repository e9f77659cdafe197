"""/api/alerts and /api/callbacks from the operator's, the viewer's and the stranger's side."""

from __future__ import annotations

import pytest

from ingest.alerts.models import Callback, Channel, Notification, Rule
from ingest.engine.services.instances import instance_create
from ingest.triggers.services import ingress_secret_create, route_upsert

pytestmark = pytest.mark.django_db

HOOK = {
    "tenant": "acme",
    "name": "ops-hook",
    "kind": "webhook",
    "secrets": {"url": "https://hooks.example.com/runledger", "hmac_key": "x" * 24},
}


@pytest.fixture
def channel_id(operator) -> int:
    answer = operator.post("/api/alerts/channels", HOOK)
    assert answer.status_code == 201, answer.content
    return int(answer.json()["id"])


def test_the_operator_creates_a_channel_whose_secrets_never_come_back(operator, channel_id):
    listed = operator.get("/api/alerts/channels").json()
    assert listed == [
        {
            "id": channel_id,
            "tenant": "acme",
            "name": "ops-hook",
            "kind": "webhook",
            "config": {},
            "enabled": True,
            "secrets_set": ["hmac_key", "url"],
        }
    ]
    assert "hooks.example.com" not in operator.get("/api/alerts/channels").content.decode()


def test_the_operator_creates_updates_and_disables_a_rule(operator, channel_id):
    body = {
        "tenant": "acme",
        "name": "failures",
        "condition": "instance_failed",
        "params": {"workflow": "gong-ingest"},
        "channel_ids": [channel_id],
    }
    created = operator.post("/api/alerts/rules", body)
    assert created.status_code == 201, created.content
    rule_id = created.json()["id"]
    updated = operator.put(f"/api/alerts/rules/{rule_id}", {**body, "throttle_seconds": 60})
    assert updated.json()["throttle_seconds"] == 60
    assert operator.post(f"/api/alerts/rules/{rule_id}/disable").json()["enabled"] is False
    assert Rule.objects.get(id=rule_id).enabled is False


def test_an_invalid_rule_is_a_json_422_that_names_the_problem_and_creates_nothing(operator, channel_id):
    answer = operator.post(
        "/api/alerts/rules",
        {
            "tenant": "acme",
            "name": "r",
            "condition": "budget_threshold",
            "params": {"percent": 0},
            "channel_ids": [channel_id],
        },
    )
    assert answer.status_code == 422
    assert answer.json()["error"] == {
        "code": "invalid_rule",
        "message": "percent of a budget_threshold rule must be at least 1; got 0",
    }
    answer = operator.post(
        "/api/alerts/rules", {"tenant": "acme", "name": "r", "condition": "instance_failed", "channel_ids": [999]}
    )
    assert answer.status_code == 404 and "not channels of tenant 'acme'" in answer.json()["error"]["message"]
    assert answer.json()["error"]["code"] == "channel_not_found"
    assert not Rule.objects.exists()


def test_the_viewer_may_read_but_not_write(viewer, operator, channel_id):
    assert viewer.get("/api/alerts/channels").status_code == 200
    answer = viewer.post("/api/alerts/channels", {**HOOK, "name": "other"})
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden"
    assert viewer.post(f"/api/alerts/channels/{channel_id}/test").status_code == 403
    assert Channel.objects.count() == 1 and not Notification.objects.exists()


def test_the_stranger_sees_nothing_of_another_tenant(stranger, channel_id):
    assert stranger.get("/api/alerts/channels").json() == []
    answer = stranger.post(f"/api/alerts/channels/{channel_id}/test")
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "channel_not_found"


def test_send_test_queues_a_delivery_instance(operator, channel_id):
    answer = operator.post(f"/api/alerts/channels/{channel_id}/test")
    assert answer.status_code == 202
    note = Notification.objects.get()
    assert answer.json()["instance_id"] == note.instance_id and note.instance_id.startswith("alert-deliver-")
    listed = operator.get("/api/alerts/notifications").json()
    assert [n["kind"] for n in listed] == ["test"]


def test_callbacks_are_set_on_an_instance_and_on_a_route(operator, stranger):
    ingress_secret_create(tenant="acme")
    inst = instance_create(workflow="test-echo", params={}, tenant="acme")
    answer = operator.put(f"/api/callbacks/instances/{inst.id}", {"url": "https://example.com/done"})
    assert answer.status_code == 200, answer.content
    assert Callback.objects.get(instance_id=inst.id).source == "instance"
    shown = operator.get(f"/api/callbacks/instances/{inst.id}").json()
    assert (shown["url"], shown["state"], shown["attempts"]) == ("https://example.com/done", "pending", 0)
    assert stranger.put(f"/api/callbacks/instances/{inst.id}", {"url": "https://evil.example/"}).status_code == 404
    route_upsert(name="orders", workflow="test-echo", tenant="acme")
    assert operator.put("/api/callbacks/routes/orders", {"url": "https://example.com/r"}).status_code == 200
    bad = operator.put("/api/callbacks/routes/orders", {"url": "javascript:alert(1)"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_callback"


def test_moving_a_rule_to_another_tenant_is_a_conflict_that_changes_nothing(operator, channel_id):
    made = operator.post(
        "/api/alerts/rules",
        {"tenant": "acme", "name": "stays", "condition": "backlog_age", "channel_ids": [channel_id]},
    )
    assert made.status_code == 201, made.content
    rule_id = made.json()["id"]
    moved = operator.put(
        f"/api/alerts/rules/{rule_id}",
        {"name": "moved", "condition": "backlog_age", "channel_ids": [channel_id], "tenant": "globex"},
    )
    assert moved.status_code == 409 and moved.json()["error"]["code"] == "rule_tenant_fixed"
    from ingest.alerts.models import Rule

    assert Rule.objects.get(id=rule_id).name == "stays"
