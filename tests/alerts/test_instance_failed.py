"""An instance fails → a signed webhook and an email, through the engine, throttled per group."""

from __future__ import annotations

import pytest
from django.utils import timezone

from ingest.alerts.follow import follow_round
from ingest.alerts.models import Alert, DeliveryState, Notification
from ingest.alerts.services import rule_save
from ingest.engine.models import Instance
from ingest.engine.services.instances import instance_create

pytestmark = pytest.mark.django_db(transaction=True)


def _fail(n: int, tenant: str = "acme") -> None:
    for i in range(n):
        instance_create(workflow="alerts-test-fail", params={"order": i}, tenant=tenant)


def test_a_failed_instance_reaches_the_webhook_signed_and_the_mailbox(
    following, webhook_channel, email_channel, receiver, smtp, drain
):
    rule_save(
        tenant="acme",
        name="failures",
        condition="instance_failed",
        params={"workflow": "alerts-test-fail"},
        channel_ids=[webhook_channel.id, email_channel.id],
        now=timezone.now(),
    )
    _fail(1)
    drain()
    follow_round(now=timezone.now())
    drain()
    got = receiver.wait_for(1)
    assert len(got) == 1 and got[0].signed, got[0].problem if got else "nothing received"
    body = got[0].json()
    assert body["type"] == "alert.firing" and body["condition"] == "instance_failed"
    assert body["tenant"] == "acme" and "refused by the fake" in body["facts"]["message"]
    mail = smtp.wait_for(1)
    assert mail[0][1] == ["oncall@example.com"]
    assert "[ALERT] alerts-test-fail failed (acme)" in mail[0][2]["Subject"]
    notes = Notification.objects.order_by("id")
    assert [n.state for n in notes] == [DeliveryState.DELIVERED] * 2
    assert all(Instance.objects.get(id=n.instance_id).status == "complete" for n in notes)


def test_failures_of_one_workflow_within_the_window_send_one_alert_then_a_summary(
    following, webhook_channel, receiver, drain
):
    rule = rule_save(
        tenant="acme",
        name="failures",
        condition="instance_failed",
        params={},
        channel_ids=[webhook_channel.id],
        throttle_seconds=600,
        now=timezone.now(),
    )
    _fail(5)
    drain()
    follow_round(now=timezone.now())
    drain()
    assert len(receiver.wait_for(1)) == 1
    alert = Alert.objects.get(rule=rule)
    assert (alert.count, alert.unsent, alert.state) == (5, 4, "firing")
    from ingest.alerts.checks import checks_round

    checks_round(now=timezone.now() + timezone.timedelta(seconds=601))
    drain()
    got = receiver.wait_for(2)
    assert [r.json()["type"] for r in got] == ["alert.firing", "alert.summary"]
    assert got[1].json()["unsent"] == 4


def test_a_later_success_of_the_workflow_resolves_the_alert(following, webhook_channel, receiver, drain):
    rule = rule_save(
        tenant="acme",
        name="failures",
        condition="instance_failed",
        params={},
        channel_ids=[webhook_channel.id],
        now=timezone.now(),
    )
    _fail(1)
    drain()
    follow_round(now=timezone.now())
    instance_create(workflow="alerts-test-fail", params={}, tenant="acme")  # still failing: same alert
    drain()
    follow_round(now=timezone.now())
    assert Alert.objects.filter(rule=rule, state="firing").count() == 1
    instance_create(workflow="alerts-test-ok", params={}, tenant="acme")
    drain()
    follow_round(now=timezone.now())
    assert Alert.objects.get(rule=rule).state == "firing"  # another workflow's success clears nothing
    instance_create(workflow="alerts-test-fail", params={"fail": False}, tenant="acme")
    drain()
    follow_round(now=timezone.now())
    drain()
    alert = Alert.objects.get(rule=rule)
    assert (alert.state, alert.count) == ("resolved", 2)
    got = receiver.wait_for(2)
    assert [r.json()["type"] for r in got] == ["alert.firing", "alert.resolved"]


def test_another_tenants_failures_do_not_alert(following, webhook_channel, receiver, drain):
    rule_save(
        tenant="acme",
        name="failures",
        condition="instance_failed",
        params={},
        channel_ids=[webhook_channel.id],
        now=timezone.now(),
    )
    _fail(2, tenant="globex")
    drain()
    follow_round(now=timezone.now())
    drain()
    assert Notification.objects.count() == 0
    assert receiver.received == []
