"""Each condition from the ledger's side: dead letters, approvals with escalation, budgets,
the backlog, workers and the ingress 5xx rate fire once per group and resolve when they clear."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from ingest.alerts.checks import checks_round
from ingest.alerts.follow import follow_round
from ingest.alerts.models import Alert, IngressError, Notification
from ingest.alerts.services import rule_save
from ingest.engine.models import ApprovalRequest, Budget, DeadLetter, Instance
from ingest.engine.services.approvals import approval_answer
from ingest.engine.services.budgets import budget_upsert
from ingest.engine.services.dead_letters import dead_letter_discard
from ingest.engine.services.instances import instance_create

pytestmark = pytest.mark.django_db(transaction=True)


def _rule(channel, condition: str, **params):
    return rule_save(
        tenant="acme", name=condition, condition=condition, params=params, channel_ids=[channel.id], now=timezone.now()
    )


def _types(receiver, n: int) -> list[str]:
    return [r.json()["type"] for r in receiver.wait_for(n)]


def test_a_new_error_signature_alerts_once_and_resolves_when_its_letters_are_dealt_with(
    following, webhook_channel, receiver, drain
):
    rule = _rule(webhook_channel, "dead_letter_new_signature")
    for i in range(3):
        instance_create(workflow="alerts-test-fail", params={"order": i}, tenant="acme")
    drain()
    follow_round(now=timezone.now())
    drain()
    alert = Alert.objects.get(rule=rule)
    assert alert.group_key.startswith("signature:") and alert.facts["error"] == "NonRetryableError"
    assert _types(receiver, 1) == ["alert.firing"]
    for letter in DeadLetter.objects.all():
        dead_letter_discard(dead_letter_id=letter.id, actor="op", reason="fixed upstream")
    checks_round(now=timezone.now())
    drain()
    assert Alert.objects.get(rule=rule).state == "resolved"
    assert _types(receiver, 2) == ["alert.firing", "alert.resolved"]


def test_a_dead_letter_group_growing_past_n_in_t_fires_and_quiet_resolves(following, webhook_channel, receiver, drain):
    rule = _rule(webhook_channel, "dead_letter_growth", count=3, minutes=10)
    for i in range(2):
        instance_create(workflow="alerts-test-fail", params={"order": i}, tenant="acme")
    drain()
    checks_round(now=timezone.now())
    assert not Alert.objects.filter(rule=rule).exists()
    instance_create(workflow="alerts-test-fail", params={"order": 9}, tenant="acme")
    drain()
    checks_round(now=timezone.now())
    checks_round(now=timezone.now())  # still true: the same alert, no second notification
    assert Alert.objects.get(rule=rule).title.startswith("3 dead letters in 10 min")
    checks_round(now=timezone.now() + timedelta(minutes=11))
    assert Alert.objects.get(rule=rule).state == "resolved"
    drain()
    assert _types(receiver, 2) == ["alert.firing", "alert.resolved"]


def test_an_approval_is_sent_to_its_approvers_and_escalated_when_overdue(
    following, webhook_channel, email_channel, receiver, smtp, drain
):
    _rule(email_channel, "approval_created")  # the primary approvers
    overdue = _rule(webhook_channel, "approval_overdue")  # the senior's channel
    inst = instance_create(workflow="alerts-test-approval", params={}, tenant="acme")
    drain(advance_clock=False)
    follow_round(now=timezone.now())
    drain(advance_clock=False)
    mail = smtp.wait_for(1)
    assert "approval waits: Ship order 7" in mail[0][2]["Subject"]
    checks_round(now=timezone.now())
    assert not Alert.objects.filter(rule=overdue).exists()  # not due yet
    checks_round(now=timezone.now() + timedelta(hours=2))
    drain(advance_clock=False)
    body = receiver.wait_for(1)[0].json()
    assert body["type"] == "alert.firing" and body["facts"]["escalation"] == "senior@example.com"
    approval = ApprovalRequest.objects.get(instance_id=inst.id)
    approval_answer(approval_id=approval.id, approved=True, actor="senior")
    checks_round(now=timezone.now() + timedelta(hours=2))
    assert set(Alert.objects.values_list("state", flat=True)) == {"resolved"}


def test_a_budget_at_80_and_100_percent_fires_each_level_once(following, webhook_channel, receiver, drain):
    at80 = _rule(webhook_channel, "budget_threshold", percent=80)
    at100 = rule_save(
        tenant="acme",
        name="budget 100",
        condition="budget_threshold",
        params={"percent": 100},
        channel_ids=[webhook_channel.id],
        now=timezone.now(),
    )
    budget = budget_upsert(scope="tenant", key="acme", period="day", limit=Decimal("10"), actor="op")
    Budget.objects.filter(id=budget.id).update(spent=Decimal("8.5"))
    checks_round(now=timezone.now())
    assert Alert.objects.filter(rule=at80, state="firing").count() == 1
    assert not Alert.objects.filter(rule=at100).exists()
    Budget.objects.filter(id=budget.id).update(spent=Decimal("10"))
    checks_round(now=timezone.now())
    assert Alert.objects.filter(state="firing").count() == 2
    Budget.objects.filter(id=budget.id).update(spent=Decimal("0"))  # a new period
    checks_round(now=timezone.now())
    assert Alert.objects.filter(state="resolved").count() == 2


def test_a_backlog_older_than_t_fires_and_no_live_worker_is_told_apart_from_an_idle_one(
    following, webhook_channel, drain
):
    backlog = _rule(webhook_channel, "backlog_age", minutes=5)
    workers = _rule(webhook_channel, "no_live_worker", minutes=5)
    checks_round(now=timezone.now())  # idle: nothing due, no alert
    assert not Alert.objects.exists()
    inst = instance_create(workflow="alerts-test-ok", params={}, tenant="acme")
    Instance.objects.filter(id=inst.id).update(ready_at=timezone.now() - timedelta(minutes=6))
    checks_round(now=timezone.now())
    assert {a.rule_id for a in Alert.objects.filter(state="firing")} == {backlog.id, workers.id}
    drain()  # a worker comes: it claims the instance (and the alerts' deliveries)
    assert Instance.objects.get(id=inst.id).status == "complete"
    checks_round(now=timezone.now())
    assert sorted(Alert.objects.values_list("rule__condition", "state")) == [
        ("backlog_age", "resolved"),
        ("no_live_worker", "resolved"),
    ]


def test_the_ingress_5xx_rate_counts_errors_against_starts(following, webhook_channel):
    rule = _rule(webhook_channel, "ingress_5xx_rate", percent=20, minutes=5, min_count=2)
    now = timezone.now()
    for _ in range(3):
        instance_create(workflow="alerts-test-ok", params={}, tenant="acme", actor="ingress:acme/default")
    IngressError.objects.create(route="orders", tenant="acme", status=500, created_at=now)
    checks_round(now=now)
    assert not Alert.objects.exists()  # one error is under min_count
    IngressError.objects.create(route="orders", tenant="acme", status=502, created_at=now)
    checks_round(now=now)
    alert = Alert.objects.get(rule=rule)
    assert alert.facts == {"errors": 2, "started": 3, "percent": 40.0}
    checks_round(now=now + timedelta(minutes=6))
    assert Alert.objects.get(rule=rule).state == "resolved"
    assert Notification.objects.filter(kind="resolved").count() == 1


def test_a_failing_alert_delivery_ends_failed_and_never_alerts_about_itself(
    following, webhook_channel, receiver, drain, settings
):
    settings.RUNLEDGER_DELIVERY_RETRIES = 1
    receiver.fail_next(5, status=500)
    _rule(webhook_channel, "instance_failed")
    instance_create(workflow="alerts-test-fail", params={}, tenant="acme")
    drain()
    follow_round(now=timezone.now())
    drain()
    follow_round(now=timezone.now())
    drain()
    note = Notification.objects.get()
    assert (note.state, note.attempts) == ("failed", 2) and "answered 500" in note.last_error
    assert DeadLetter.objects.filter(instance_id=note.instance_id).exists()
    assert Notification.objects.count() == 1  # the failed delivery raised no alert of its own


def test_an_overdue_approval_is_emailed_to_the_escalation_the_workflow_named(following, email_channel, smtp, drain):
    rule_save(
        tenant="acme",
        name="escalate",
        condition="approval_overdue",
        params={},
        channel_ids=[email_channel.id],
        now=timezone.now(),
    )
    instance_create(workflow="alerts-test-approval", params={}, tenant="acme")
    drain(advance_clock=False)
    checks_round(now=timezone.now() + timedelta(hours=2))
    drain(advance_clock=False)
    mail = smtp.wait_for(1)
    assert sorted(mail[0][1]) == ["oncall@example.com", "senior@example.com"]
    assert "[ALERT] approval overdue: Ship order 7" in mail[0][2]["Subject"]
    assert Notification.objects.get().recipient == "oncall@example.com, senior@example.com"
