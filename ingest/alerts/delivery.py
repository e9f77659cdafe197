"""One delivery attempt of a notification or a callback, as a step runs it: the IO through
`ingest.sources.notify`, and the row updated with how it went (attempts, last error, delivered).

A failure re-raises the source's error for the engine's retry policy; one that retrying cannot
fix (a 4xx, a missing channel) is a NonRetryableError, so the instance errors and dead-letters
at once. The follower marks the row failed when its delivery instance errors.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from ingest.alerts.callbacks import tenant_signing_secrets
from ingest.alerts.messages import callback_payload, slack_payload, text
from ingest.alerts.models import Callback, ChannelKind, DeliveryState, Notification
from ingest.engine import NonRetryableError, redact
from ingest.engine.models import Instance
from ingest.sources.notify import Delivered, NotifyError, mail_send, webhook_post


def _base_url() -> str:
    return str(getattr(settings, "RUNLEDGER_BASE_URL", ""))


def _send(note: Notification) -> Delivered:
    channel = note.channel
    if channel is None:
        raise NonRetryableError(f"notification {note.id}: its channel was deleted")
    secrets = channel.secret_values()
    if channel.kind == ChannelKind.EMAIL:
        sender = str(getattr(settings, "RUNLEDGER_ALERT_SENDER", settings.DEFAULT_FROM_EMAIL))
        return mail_send(
            subject=note.subject,
            body=text(note.body, base_url=_base_url()),
            to=list(note.body.get("to") or channel.config.get("to", [])),
            sender=sender,
            smtp=channel.config.get("smtp"),
            password=str(secrets.get("smtp_password", "")),
        )
    if channel.kind == ChannelKind.SLACK:
        return webhook_post(url=secrets["url"], payload=slack_payload(note.body, base_url=_base_url()))
    return webhook_post(
        url=secrets["url"],
        payload=note.body,
        secret=secrets["hmac_key"],
        headers={"X-Runledger-Event": note.body.get("type", "alert")},
    )


def notification_deliver(*, notification_id: int) -> dict[str, Any]:
    """Send the notification once; the step's result says how it went."""
    note = Notification.objects.select_related("channel").get(id=notification_id)
    if note.state == DeliveryState.DELIVERED:
        return {"delivered": True, "again": True}
    Notification.objects.filter(id=note.id).update(attempts=F("attempts") + 1)
    try:
        sent = _send(note)
    except NotifyError as exc:
        Notification.objects.filter(id=note.id).update(last_error=redact(str(exc))[:2000])
        if not exc.retryable:
            raise NonRetryableError.wrap(exc) from exc
        raise
    Notification.objects.filter(id=note.id).update(
        state=DeliveryState.DELIVERED, delivered_at=timezone.now(), last_error=""
    )
    return {"delivered": True, "status": sent.status, "seconds": round(sent.seconds, 4)}


def callback_deliver(*, callback_id: int) -> dict[str, Any]:
    """POST the instance's outcome to its callback URL, signed with the tenant's ingress secret
    (and, during a rotation's overlap, with the secret it replaced too)."""
    callback = Callback.objects.get(id=callback_id)
    instance = Instance.objects.get(id=callback.instance_id)
    secrets = tenant_signing_secrets(callback.tenant, now=timezone.now())
    if not secrets:
        raise NonRetryableError(
            f"tenant {callback.tenant!r} has no enabled ingress secret to sign the "
            f"callback of {callback.instance_id} with"
        )
    payload = callback_payload(
        instance_id=instance.id,
        workflow=instance.workflow,
        tenant=instance.tenant,
        status=instance.status,
        output=instance.output,
        error_name=instance.error_name,
        error_message=instance.error_message,
        ended_at=instance.ended_at,
    )
    Callback.objects.filter(id=callback.id).update(attempts=F("attempts") + 1)
    try:
        sent = webhook_post(
            url=callback.url,
            payload=payload,
            secret=secrets,
            headers={"X-Runledger-Event": "instance.finished", "X-Runledger-Instance": instance.id},
        )
    except NotifyError as exc:
        Callback.objects.filter(id=callback.id).update(last_error=redact(str(exc))[:2000], last_status=exc.status)
        if not exc.retryable:
            raise NonRetryableError.wrap(exc) from exc
        raise
    Callback.objects.filter(id=callback.id).update(
        state=DeliveryState.DELIVERED, delivered_at=timezone.now(), last_status=sent.status, last_error=""
    )
    return {"delivered": True, "status": sent.status}


def delivery_failed(*, workflow: str, instance_id: str, message: str) -> int:
    """The delivery instance errored (retries exhausted): its row is failed, for the operator."""
    if workflow == "alert-deliver":
        return (
            Notification.objects.filter(instance_id=instance_id)
            .exclude(state=DeliveryState.DELIVERED)
            .update(state=DeliveryState.FAILED, last_error=redact(message)[:2000])
        )
    return (
        Callback.objects.filter(delivery_instance_id=instance_id)
        .exclude(state=DeliveryState.DELIVERED)
        .update(state=DeliveryState.FAILED, last_error=redact(message)[:2000])
    )
