"""Alerts firing and resolving: a signal meets the tenant's rules, each rule's group fires once,
is throttled to one notification per window (the rest go into a summary) and resolves when its
condition clears. Every notification is a row and an `alert-deliver` instance of the engine."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.db import transaction

from ingest.alerts.conditions import Clear, Signal, may_send, rule_matches, summary_due
from ingest.alerts.messages import AlertView, webhook_payload
from ingest.alerts.models import (
    Alert,
    AlertState,
    Channel,
    ChannelKind,
    Notification,
    NotificationKind,
    Rule,
)
from ingest.engine.services.instances import instance_create
from ingest.sources.notify import address_problem

DELIVER_WORKFLOW = "alert-deliver"


def rules_for(condition: str, tenant: str) -> list[Rule]:
    return list(Rule.objects.filter(condition=condition, tenant=tenant, enabled=True))


def signal_handle(signal: Signal, *, now: datetime, rules: Iterable[Rule] | None = None) -> list[Alert]:
    """Fire every enabled rule of the signal's tenant and condition that matches it."""
    fired = []
    for rule in rules if rules is not None else rules_for(signal.condition, signal.tenant):
        if rule_matches(rule.params, signal):
            fired.append(alert_fire(rule=rule, signal=signal, now=now))
    return fired


def alert_fire(*, rule: Rule, signal: Signal, now: datetime) -> Alert:
    """One more event for the rule's group: a new alert notifies at once; an alert already firing
    notifies again only once its window has passed, else the event waits for the summary."""
    with transaction.atomic():
        alert = (
            Alert.objects.select_for_update()
            .filter(rule=rule, group_key=signal.group_key, state=AlertState.FIRING)
            .first()
        )
        if alert is None:
            alert = Alert.objects.create(
                rule=rule,
                tenant=rule.tenant,
                group_key=signal.group_key,
                title=signal.title[:300],
                facts=signal.facts,
                first_at=now,
                last_at=now,
                last_sent_at=now,
                unsent=0,
            )
            notifications_create(alert=alert, rule=rule, kind=NotificationKind.FIRING, now=now)
            return alert
        alert.count += 1
        alert.last_at = now
        window = timedelta(seconds=rule.throttle_seconds)
        if may_send(last_sent_at=alert.last_sent_at, window=window, now=now):
            alert.unsent += 1
            alert.facts = {**signal.facts}
            _send_summary(alert, rule, now)
        else:
            alert.unsent += 1
        alert.save(update_fields=["count", "last_at", "unsent", "facts", "last_sent_at"])
    return alert


def _send_summary(alert: Alert, rule: Rule, now: datetime) -> None:
    notifications_create(alert=alert, rule=rule, kind=NotificationKind.SUMMARY, now=now)
    alert.unsent, alert.last_sent_at = 0, now


def clear_handle(clear: Clear, *, now: datetime) -> int:
    """Resolve the firing alerts of the group; how many resolved."""
    alerts = Alert.objects.filter(
        rule__condition=clear.condition, tenant=clear.tenant, group_key=clear.group_key, state=AlertState.FIRING
    ).values_list("id", flat=True)
    return sum(alert_resolve(alert_id=a, now=now) for a in list(alerts))


def alert_resolve(*, alert_id: int, now: datetime) -> bool:
    with transaction.atomic():
        alert = (
            Alert.objects.select_for_update()
            .select_related("rule")
            .filter(id=alert_id, state=AlertState.FIRING)
            .first()
        )
        if alert is None:
            return False
        alert.state, alert.resolved_at = AlertState.RESOLVED, now
        alert.save(update_fields=["state", "resolved_at"])
        if alert.rule.notify_resolved:
            notifications_create(alert=alert, rule=alert.rule, kind=NotificationKind.RESOLVED, now=now)
    return True


def summaries_send(*, now: datetime) -> int:
    """Summaries of firing alerts whose window has passed with events held back."""
    sent = 0
    for alert in Alert.objects.filter(state=AlertState.FIRING, unsent__gt=0).select_related("rule"):
        window = timedelta(seconds=alert.rule.throttle_seconds)
        if not summary_due(unsent=alert.unsent, last_sent_at=alert.last_sent_at, window=window, now=now):
            continue
        with transaction.atomic():
            locked = Alert.objects.select_for_update().get(id=alert.id)
            if summary_due(unsent=locked.unsent, last_sent_at=locked.last_sent_at, window=window, now=now):
                _send_summary(locked, alert.rule, now)
                locked.save(update_fields=["unsent", "last_sent_at"])
                sent += 1
    return sent


def view_of(alert: Alert | None, rule: Rule | None, *, now: datetime, tenant: str = "") -> AlertView:
    if alert is None or rule is None:
        return AlertView(None, "test", "test", tenant, "test", "Test notification", 0, 0, {}, now)
    return AlertView(
        alert.id,
        rule.name,
        rule.condition,
        alert.tenant,
        alert.group_key,
        alert.title,
        alert.count,
        alert.unsent,
        alert.facts,
        now,
    )


def email_to(channel: Channel, alert: Alert | None) -> list[str]:
    """An email channel's recipients; an overdue approval's also goes to the address the workflow
    named as its escalation (from the primary approver to a senior one), when it is one."""
    to = list(channel.config.get("to", []))
    escalation = str((alert.facts if alert else {}).get("escalation") or "").strip()
    if escalation and address_problem(escalation) is None and escalation not in to:
        to.append(escalation)
    return to


def recipient_of(channel: Channel, alert: Alert | None = None) -> str:
    if channel.kind == ChannelKind.EMAIL:
        return ", ".join(email_to(channel, alert))[:500]
    return f"{channel.kind}: {urlsplit(channel.secret_values().get('url', '')).hostname or '?'}"


def notifications_create(
    *, alert: Alert | None, rule: Rule | None, kind: str, now: datetime, channels: Iterable[Channel] | None = None
) -> list[Notification]:
    """A notification per enabled channel, each handed to the engine as an `alert-deliver`
    instance in the same transaction: it commits with the alert or not at all."""
    targets = channels if channels is not None else rule.channels.filter(enabled=True) if rule else []
    targets = list(targets)
    tenant = targets[0].tenant if targets else ""
    payload = webhook_payload(kind, view_of(alert, rule, now=now, tenant=tenant))
    made = []
    with transaction.atomic():
        for channel in targets:
            body = {**payload, "to": email_to(channel, alert)} if channel.kind == ChannelKind.EMAIL else payload
            note = Notification.objects.create(
                tenant=channel.tenant,
                alert=alert,
                channel=channel,
                kind=kind,
                recipient=recipient_of(channel, alert),
                subject=payload["subject"],
                body=body,
                created_at=now,
                instance_id=f"{DELIVER_WORKFLOW}-{uuid.uuid4().hex[:20]}",
            )
            instance_create(
                workflow=DELIVER_WORKFLOW,
                id=note.instance_id,
                params={"notification": note.id},
                tenant=channel.tenant,
                actor="alerts",
            )
            made.append(note)
    return made


def channel_test(*, channel: Channel, now: datetime) -> Notification:
    """The "send test" button: one test notification through the channel, enabled or not."""
    return notifications_create(alert=None, rule=None, kind=NotificationKind.TEST, now=now, channels=[channel])[0]
