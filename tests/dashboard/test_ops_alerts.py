"""The Alerts pages from three sides: the operator creates, edits, disables and tests; the viewer
reads; the stranger of another tenant sees nothing and can change nothing."""

from __future__ import annotations

import pytest
from django.utils import timezone

from ingest.alerts.models import Channel, Notification, Rule
from ingest.alerts.services import channel_save, rule_save

pytestmark = pytest.mark.django_db

KEY = "s" * 20


@pytest.fixture
def hook(db):
    return channel_save(
        tenant="acme",
        name="ops-hook",
        kind="webhook",
        secrets={"url": "http://127.0.0.1:9/hook", "hmac_key": KEY},
        now=timezone.now(),
    )


@pytest.fixture
def rule(hook):
    return rule_save(
        tenant="acme",
        name="gong failures",
        condition="instance_failed",
        params={"workflow": "gong-ingest"},
        channel_ids=[hook.id],
        now=timezone.now(),
    )


def test_the_operator_sees_rules_and_channels_but_never_a_secret(operator, rule, hook):
    page = operator.get("/alerts/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "gong failures" in html and "ops-hook" in html and "workflow=gong-ingest" in html
    assert KEY not in html and "127.0.0.1:9" not in html
    assert "Send test" in html


def test_the_operator_creates_an_email_channel_and_a_rule_through_the_forms(operator):
    answer = operator.post(
        "/alerts/channels/create/",
        {
            "tenant": "acme",
            "name": "oncall",
            "kind": "email",
            "to": "oncall@example.com, lead@example.com",
            "enabled": "on",
        },
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    channel = Channel.objects.get(name="oncall")
    assert channel.config == {"to": ["oncall@example.com", "lead@example.com"]}
    answer = operator.post(
        "/alerts/rules/create/",
        {
            "tenant": "acme",
            "name": "budget 80",
            "condition": "budget_threshold",
            "params": '{"percent": 80}',
            "channels": [str(channel.id)],
            "throttle_seconds": "300",
            "notify_resolved": "on",
            "enabled": "on",
        },
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    saved = Rule.objects.get(name="budget 80")
    assert (saved.params, saved.throttle_seconds, list(saved.channels.all())) == ({"percent": 80}, 300, [channel])


def test_an_invalid_rule_is_refused_with_the_reason_and_changes_nothing(operator, hook):
    answer = operator.post(
        "/alerts/rules/create/",
        {
            "tenant": "acme",
            "name": "bad",
            "condition": "backlog_age",
            "params": '{"minutes": 0}',
            "channels": [str(hook.id)],
            "throttle_seconds": "600",
        },
    )
    assert answer.status_code == 400
    assert "minutes of a backlog_age rule must be at least 1" in answer.content.decode()
    answer = operator.post(
        "/alerts/rules/create/",
        {
            "tenant": "acme",
            "name": "bad",
            "condition": "backlog_age",
            "params": "[1,",
            "channels": [str(hook.id)],
            "throttle_seconds": "600",
        },
    )
    assert answer.status_code == 400 and "not valid JSON" in answer.content.decode()
    assert not Rule.objects.filter(name="bad").exists()


def test_a_webhook_channel_without_a_long_enough_key_is_refused(operator):
    answer = operator.post(
        "/alerts/channels/create/",
        {
            "tenant": "acme",
            "name": "weak",
            "kind": "webhook",
            "url": "https://hooks.example.com/x",
            "hmac_key": "short",
        },
    )
    assert answer.status_code == 400
    assert "HMAC key of at least 16 characters" in answer.content.decode()
    assert not Channel.objects.filter(name="weak").exists()


def test_editing_a_channel_with_blank_secrets_keeps_them(operator, hook):
    answer = operator.post(
        f"/alerts/channels/{hook.id}/save/",
        {"tenant": "acme", "name": "ops-hook-2", "kind": "webhook", "enabled": "on"},
    )
    assert answer.status_code == 302
    hook.refresh_from_db()
    assert hook.name == "ops-hook-2" and hook.secret_values()["hmac_key"] == KEY


def test_the_operator_disables_a_rule_and_queues_a_test_through_the_engine(operator, rule, hook):
    assert operator.post(f"/alerts/rules/{rule.id}/toggle/").status_code == 302
    rule.refresh_from_db()
    assert rule.enabled is False
    assert operator.post(f"/alerts/channels/{hook.id}/test/").status_code == 302
    note = Notification.objects.get()
    assert (note.kind, note.channel) == ("test", hook) and note.instance_id.startswith("alert-deliver-")


def test_the_viewer_reads_but_may_not_change_or_test(viewer, rule, hook):
    assert viewer.get("/alerts/").status_code == 200
    assert "Send test" not in viewer.get("/alerts/").content.decode()
    assert viewer.post(f"/alerts/rules/{rule.id}/toggle/").status_code == 403
    assert viewer.post(f"/alerts/channels/{hook.id}/test/").status_code == 403
    rule.refresh_from_db()
    assert rule.enabled and not Notification.objects.exists()


def test_a_stranger_sees_no_rule_of_another_tenant_and_gets_404_acting_on_one(stranger, rule, hook):
    assert "gong failures" not in stranger.get("/alerts/").content.decode()
    assert stranger.post(f"/alerts/rules/{rule.id}/toggle/").status_code == 404
    assert stranger.get(f"/alerts/channels/{hook.id}/edit/").status_code == 404
    assert stranger.post(f"/alerts/channels/{hook.id}/test/").status_code == 404
    assert not Notification.objects.exists()


def test_the_notifications_page_shows_to_whom_and_whether_delivered(operator, hook):
    from ingest.alerts.firing import channel_test

    note = channel_test(channel=hook, now=timezone.now())
    Notification.objects.filter(id=note.id).update(state="failed", last_error="POST to 127.0.0.1 answered 503")
    html = operator.get("/alerts/notifications/?state=failed").content.decode()
    assert "webhook: 127.0.0.1" in html and "answered 503" in html and "failed" in html
    assert "answered 503" not in operator.get("/alerts/notifications/?state=delivered").content.decode()


def test_a_channels_secrets_are_encrypted_at_rest(hook):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT secrets FROM alerts_channel WHERE id = %s", [hook.id])
        stored = cursor.fetchone()[0]
    assert stored.startswith("enc:") and KEY not in stored and "127.0.0.1" not in stored
    assert Channel.objects.get(id=hook.id).secret_values()["hmac_key"] == KEY
