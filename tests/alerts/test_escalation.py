"""An overdue approval escalates once, however its deadline passes: the instance woken at the
timeout (the request expired at that moment), or the worker late and the request still pending.
The inbox shows it overdue until it is answered or expires."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from ingest.alerts import checks
from ingest.alerts.checks import checks_round
from ingest.alerts.models import Alert, Notification
from ingest.alerts.services import rule_save
from ingest.engine import clock
from ingest.engine.models import ApprovalRequest, Instance
from ingest.engine.services.instances import instance_create
from ingest.engine.worker.turns import run_until_idle
from tests.personas import operator_client

pytestmark = pytest.mark.django_db(transaction=True)


def _escalation_rule(channel):
    return rule_save(
        tenant="acme",
        name="escalate",
        condition="approval_overdue",
        params={},
        channel_ids=[channel.id],
        now=timezone.now(),
    )


def _checks_for(seconds: int) -> None:
    """The alert runner's checks, every 10 s of the engine's clock for `seconds`."""
    for _ in range(seconds // 10):
        checks_round(now=clock.now())
        clock.clock.advance(timedelta(seconds=10))


def test_an_approval_whose_instance_wakes_at_the_timeout_escalates_once(following, email_channel, smtp):
    rule = _escalation_rule(email_channel)
    inst = instance_create(workflow="alerts-test-approval", params={}, tenant="acme")
    run_until_idle()
    checks_round(now=clock.now())
    assert not Alert.objects.filter(rule=rule).exists()  # not due yet
    clock.clock.advance(timedelta(hours=1, milliseconds=140))
    run_until_idle()  # the instance wakes at its timeout: request expired, instance errored
    assert ApprovalRequest.objects.get(instance_id=inst.id).state == "expired"
    assert Instance.objects.get(id=inst.id).status == "errored"
    _checks_for(60)
    run_until_idle()  # delivers the notifications
    mail = smtp.wait_for(1)
    assert sorted(mail[0][1]) == ["oncall@example.com", "senior@example.com"]
    assert "[ALERT] approval overdue: Ship order 7" in mail[0][2]["Subject"]
    assert list(Notification.objects.filter(alert__rule=rule, kind="firing").values_list("recipient", flat=True)) == [
        "oncall@example.com, senior@example.com"
    ]
    assert list(Alert.objects.filter(rule=rule).values_list("state", flat=True)) == ["resolved"]


def test_a_pending_approval_past_due_escalates_once_shows_overdue_and_not_again_when_it_expires(
    following, email_channel, smtp
):
    rule = _escalation_rule(email_channel)
    inst = instance_create(workflow="alerts-test-approval", params={}, tenant="acme")
    run_until_idle()
    operator = operator_client()
    assert "(overdue)" not in operator.get("/approvals/").content.decode()
    clock.clock.advance(timedelta(hours=1, minutes=5))  # the worker is late: nothing ran the instance
    _checks_for(30)
    html = operator.get("/approvals/").content.decode()
    assert "Ship order 7" in html and "(overdue)" in html
    assert Alert.objects.get(rule=rule).state == "firing"
    run_until_idle()  # the worker is back: the request expires, the instance errors
    assert ApprovalRequest.objects.get(instance_id=inst.id).state == "expired"
    _checks_for(30)
    r = operator.get("/approvals/")
    assert r.context["pending"] == [] and [a.state for a in r.context["recent"]] == ["expired"]
    assert Notification.objects.filter(alert__rule=rule, kind="firing").count() == 1
    assert Alert.objects.get(rule=rule).state == "resolved"


def test_an_approval_that_expired_before_the_rule_existed_is_not_escalated(following, email_channel):
    inst = instance_create(workflow="alerts-test-approval", params={}, tenant="acme")
    run_until_idle()
    clock.clock.advance(timedelta(hours=2))
    run_until_idle()
    assert ApprovalRequest.objects.get(instance_id=inst.id).state == "expired"
    rule = rule_save(
        tenant="acme",
        name="escalate",
        condition="approval_overdue",
        params={},
        channel_ids=[email_channel.id],
        now=clock.now(),
    )
    _checks_for(30)
    assert not Alert.objects.filter(rule=rule).exists()


def test_approvals_whose_timeout_the_workflow_catches_escalate_once_each_even_past_a_rounds_cap(
    following, webhook_channel, receiver, monkeypatch
):
    monkeypatch.setattr(checks, "ROUND_CAP", 2)  # three expiries: more than one round takes
    rule = _escalation_rule(webhook_channel)
    insts = [
        instance_create(workflow="alerts-test-approval-caught", params={"order": n}, tenant="acme") for n in (1, 2, 3)
    ]
    run_until_idle()
    clock.clock.advance(timedelta(hours=1, seconds=1))
    run_until_idle()  # every instance wakes at its timeout, catches it and completes
    assert [Instance.objects.get(id=i.id).status for i in insts] == ["complete"] * 3
    assert set(ApprovalRequest.objects.values_list("state", flat=True)) == {"expired"}
    _checks_for(60)
    run_until_idle()  # delivers the notifications
    receiver.wait_for(6)  # each fires, then resolves the round after
    _checks_for(60)
    run_until_idle()
    bodies = [r.json() for r in receiver.received]
    firing = [b for b in bodies if b["type"] == "alert.firing"]
    assert sorted(b["title"] for b in firing) == [f"approval overdue: Ship order {n}" for n in (1, 2, 3)]
    assert len(bodies) == 6 and {b["type"] for b in bodies} - {"alert.firing"} == {"alert.resolved"}
    assert {b["facts"]["escalation"] for b in firing} == {"senior@example.com"}
    assert set(Alert.objects.filter(rule=rule).values_list("state", flat=True)) == {"resolved"}
