"""Reads for the Alerts page, the notifications list, the instance page and the API: plain rows
scoped to the caller's tenants. A channel's secrets never leave here; only whether each is set."""

from __future__ import annotations

from typing import Any

from ingest.alerts.models import Alert, AlertState, Callback, Channel, Notification, Rule


def rule_row(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "tenant": rule.tenant,
        "name": rule.name,
        "condition": rule.condition,
        "params": rule.params,
        "channel_ids": sorted(c.id for c in rule.channels.all()),
        "throttle_seconds": rule.throttle_seconds,
        "notify_resolved": rule.notify_resolved,
        "enabled": rule.enabled,
        "created_by": rule.created_by,
        "updated_at": rule.updated_at,
    }


def rule_rows(*, tenants: list[str]) -> list[dict[str, Any]]:
    rules = Rule.objects.filter(tenant__in=tenants).prefetch_related("channels").order_by("tenant", "name")
    firing = dict.fromkeys(
        Alert.objects.filter(rule__in=rules, state=AlertState.FIRING).values_list("rule_id", flat=True), True
    )
    return [{**rule_row(r), "channels": [c.name for c in r.channels.all()], "firing": r.id in firing} for r in rules]


def rule_get(*, tenants: list[str], rule_id: int) -> Rule | None:
    return Rule.objects.filter(id=rule_id, tenant__in=tenants).prefetch_related("channels").first()


def channel_row(channel: Channel) -> dict[str, Any]:
    secrets = channel.secret_values()
    return {
        "id": channel.id,
        "tenant": channel.tenant,
        "name": channel.name,
        "kind": channel.kind,
        "config": channel.config,
        "enabled": channel.enabled,
        "secrets_set": sorted(k for k, v in secrets.items() if v),
    }


def channel_rows(*, tenants: list[str]) -> list[dict[str, Any]]:
    return [channel_row(c) for c in Channel.objects.filter(tenant__in=tenants).order_by("tenant", "name")]


def channel_get(*, tenants: list[str], channel_id: int) -> Channel | None:
    return Channel.objects.filter(id=channel_id, tenant__in=tenants).first()


def channels_of(*, tenants: list[str]) -> list[Channel]:
    return list(Channel.objects.filter(tenant__in=tenants).order_by("tenant", "name"))


def notification_row(note: Notification) -> dict[str, Any]:
    return {
        "id": note.id,
        "tenant": note.tenant,
        "kind": note.kind,
        "channel": note.channel.name if note.channel else "",
        "recipient": note.recipient,
        "subject": note.subject,
        "state": note.state,
        "attempts": note.attempts,
        "last_error": note.last_error,
        "instance_id": note.instance_id,
        "created_at": note.created_at,
        "delivered_at": note.delivered_at,
    }


def notification_rows(*, tenants: list[str], limit: int = 100) -> list[dict[str, Any]]:
    notes = Notification.objects.filter(tenant__in=tenants).select_related("channel").order_by("-created_at", "-id")
    return [notification_row(n) for n in notes[:limit]]


def alert_rows(*, tenants: list[str], limit: int = 50) -> list[dict[str, Any]]:
    alerts = Alert.objects.filter(tenant__in=tenants).select_related("rule").order_by("-last_at", "-id")[:limit]
    return [
        {
            "id": a.id,
            "tenant": a.tenant,
            "rule": a.rule.name,
            "group": a.group_key,
            "title": a.title,
            "state": a.state,
            "count": a.count,
            "first_at": a.first_at,
            "last_at": a.last_at,
            "resolved_at": a.resolved_at,
        }
        for a in alerts
    ]


def callback_row(callback: Callback) -> dict[str, Any]:
    return {
        "instance_id": callback.instance_id,
        "url": callback.url,
        "source": callback.source,
        "state": callback.state,
        "attempts": callback.attempts,
        "last_status": callback.last_status,
        "last_error": callback.last_error,
        "delivery_instance_id": callback.delivery_instance_id,
        "delivered_at": callback.delivered_at,
    }


def callback_for(*, instance_id: str) -> dict[str, Any] | None:
    found = Callback.objects.filter(instance_id=instance_id).first()
    return callback_row(found) if found else None
