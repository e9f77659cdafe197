"""Named events: start subscribed workflows, deliver to an addressed instance, once per event id."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q

from ingest.engine import InstanceAlreadyExists
from ingest.engine.services import instances as engine_services
from ingest.triggers import coalesce as coalescing
from ingest.triggers import patterns
from ingest.triggers.errors import InvalidEvent
from ingest.triggers.limits import RESERVED_PARAMS
from ingest.triggers.models import PublishedEvent, Subscription
from ingest.triggers.services.coalesce import coalesce_add


@dataclass(frozen=True)
class Published:
    event_id: str
    started: list[str] = field(default_factory=list)
    delivered: list[str] = field(default_factory=list)
    duplicate: bool = False  # an event with this id was published before: nothing new happened


def _validate(type: str, data: Any, event_id: str) -> None:
    if not patterns.EVENT_TYPE.match(type or ""):
        raise InvalidEvent(
            f"event type {str(type)[:60]!r} is invalid; use 1 to 200 letters, digits and . _ - : /, e.g. user.created"
        )
    if not isinstance(data, dict):
        raise InvalidEvent(f"event {type!r}: data must be a JSON object, not {data.__class__.__name__}")
    for key in RESERVED_PARAMS:  # the data become the params of the instances it starts
        if key in data:
            raise InvalidEvent(f"event {type!r}: the data key {key!r} is reserved; rename it")
    if not event_id or len(event_id) > 200:
        raise InvalidEvent("an event id is 1 to 200 characters")


def _instance_id(event_id: str, subscription_id: int) -> str:
    # Deterministic per (event, subscription): a retried publish cannot start a second instance.
    digest = hashlib.sha256(f"{event_id}\x00{subscription_id}".encode()).hexdigest()[:24]
    return f"evt-{subscription_id}-{digest}"


def _start_subscribers(row: PublishedEvent, *, actor: str, now: datetime) -> list[str]:
    started = []
    subscriptions = Subscription.objects.filter(enabled=True).filter(Q(tenant="") | Q(tenant=row.tenant)).order_by("pk")
    for sub in subscriptions:
        if not (patterns.type_matches(sub.pattern, row.type) and patterns.filters_match(sub.filters, row.data)):
            continue
        params = {**row.data, "_event": {"id": row.id, "type": row.type, "tenant": row.tenant}}
        config = coalescing.parse(sub.coalesce)
        if config is not None:  # debounced or batched: the event joins its key's window
            started.append(
                coalesce_add(
                    source=f"subscription:{sub.pk}",
                    config=config,
                    workflow=sub.workflow,
                    tenant=row.tenant,
                    payload=params,
                    now=now,
                    actor=actor,
                ).instance_id
            )
            continue
        instance_id = _instance_id(row.id, sub.pk)
        try:
            with transaction.atomic():
                engine_services.instance_create(
                    workflow=sub.workflow, id=instance_id, params=params, tenant=row.tenant, actor=actor
                )
        except InstanceAlreadyExists:
            pass
        started.append(instance_id)
    return started


def event_publish(
    *,
    type: str,
    data: dict[str, Any] | None = None,
    id: str | None = None,
    tenant: str = "default",
    instance_id: str | None = None,
    actor: str = "",
    now: datetime,
) -> Published:
    """Start every subscribed workflow and deliver to `instance_id` when given; once per `id`.

    The PublishedEvent row, the instances and the delivery commit together, so a concurrent or
    retried publish of the same id either sees all of it or does it itself.
    """
    data = {} if data is None else data
    event_id = id or uuid.uuid4().hex
    _validate(type, data, event_id)
    try:
        with transaction.atomic():
            row = PublishedEvent.objects.create(
                id=event_id,
                type=type,
                tenant=tenant,
                data=data,
                instance_id=instance_id or "",
                actor=actor,
                created_at=now,
            )
            row.started = _start_subscribers(row, actor=actor or "event", now=now)
            if instance_id:
                engine_services.instance_send_event(
                    instance_id=instance_id, type=type, payload=data, actor=actor or "event"
                )
                row.delivered = [instance_id]
            row.save(update_fields=["started", "delivered"])
    except IntegrityError:
        existing = PublishedEvent.objects.filter(id=event_id).first()
        if existing is None:
            raise
        return Published(existing.id, list(existing.started), list(existing.delivered), True)
    return Published(row.id, row.started, row.delivered, False)
