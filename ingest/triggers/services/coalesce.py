"""Debounce and batch windows: each event of a coalescing route or subscription joins its key's
open window, whose instance already exists, queued until the window closes (coalesce.py).

Exactly once, across any number of web processes: the window row is locked while an event joins
it; the instance is updated under its own row lock only while no worker has claimed it
(`instance_defer`), and a claimed one closes the window, so the next event opens a new one. A
window closes by itself when its instance starts: nothing has to flush it, and a restart loses
nothing (the window and its instance are rows).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction

from ingest.engine.models import Instance, Status
from ingest.engine.services import instances as engine_services
from ingest.triggers import coalesce
from ingest.triggers.coalesce import BATCH, CoalesceConfig
from ingest.triggers.models import CoalesceWindow

_ID_SAFE = re.compile(r"[^A-Za-z0-9_-]")
# Attempts of one event: only a key's first events can collide (inserting its row), and each
# collision means another event got in, so a handful always suffices.
MAX_TRIES = 10
IDLE = timedelta(days=1)


@dataclass(frozen=True)
class Coalesced:
    """Where one event went: the instance of its window, and the window's state after it."""

    instance_id: str
    mode: str
    key: str
    count: int  # events in the window, this one included
    starts_at: datetime
    opened: bool  # this event opened the window (and created the instance)


def coalesce_add(
    *,
    source: str,
    config: CoalesceConfig,
    workflow: str,
    tenant: str,
    payload: dict[str, Any],
    now: datetime,
    priority: int | None = None,
    actor: str = "",
) -> Coalesced:
    """Add one event to its key's window of `source`; opens the window (and creates its queued
    instance) when none is open. Runs in the caller's transaction when there is one.

    Each (source, key) has one row for good, reopened in place window after window: events of a
    key only ever queue on its row lock, and only a key's very first events race to insert it.
    """
    key = coalesce.key_of(config, payload)
    size = len(json.dumps(payload, separators=(",", ":")))
    for _ in range(MAX_TRIES):
        try:
            with transaction.atomic():
                window = CoalesceWindow.objects.select_for_update().filter(source=source, key=key).first()
                if window is None:
                    window = CoalesceWindow.objects.create(
                        source=source,
                        key=key,
                        mode=config.mode,
                        instance_id="",
                        workflow=workflow,
                        tenant=tenant,
                        first_at=now,
                        last_at=now,
                        starts_at=now,
                    )
                # A window whose start time has come is closed even before a worker starts its
                # instance: the quiet period passed, or the timeout capped it.
                if window.instance_id and window.starts_at > now:
                    joined = _join(window, config, payload, size=size, now=now)
                    if joined is not None:
                        return joined
                return _open(
                    window,
                    config=config,
                    workflow=workflow,
                    tenant=tenant,
                    payload=payload,
                    size=size,
                    now=now,
                    priority=priority,
                    actor=actor,
                )
        except IntegrityError:
            continue  # a concurrent first event of this key inserted its row: queue on it
    raise IntegrityError(f"the {config.mode} window {source} [{key}] is contended; retry the event")


def _params(config: CoalesceConfig, window: CoalesceWindow, payload: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "key": window.key,
        "count": window.count,
        "first_at": window.first_at.isoformat(),
        "last_at": window.last_at.isoformat(),
        "source": window.source,
    }
    if config.mode == BATCH:
        return {"events": list(window.payloads), "_batch": meta}
    return {**payload, "_debounce": meta}


def _join(
    window: CoalesceWindow, config: CoalesceConfig, payload: dict[str, Any], *, size: int, now: datetime
) -> Coalesced | None:
    full = config.mode == BATCH and (
        window.count + 1 >= config.max_size or window.bytes + size >= coalesce.MAX_BATCH_BYTES
    )
    window.count += 1
    window.last_at = now
    window.bytes += size
    if config.mode == BATCH:
        window.payloads = [*window.payloads, payload]
    starts = now if full else coalesce.starts_at(config, first_at=window.first_at, now=now)
    if not engine_services.instance_defer(
        instance_id=window.instance_id, params=_params(config, window, payload), start_at=starts
    ):
        return None  # a worker started it: this event opens the next window
    instance_id = window.instance_id
    window.starts_at = starts
    if full:  # the batch starts now; the next event opens another
        window.instance_id, window.payloads = "", []
    window.save(update_fields=["instance_id", "count", "last_at", "bytes", "payloads", "starts_at"])
    return Coalesced(instance_id, config.mode, window.key, window.count, starts, opened=False)


def _open(
    window: CoalesceWindow,
    *,
    config: CoalesceConfig,
    workflow: str,
    tenant: str,
    payload: dict[str, Any],
    size: int,
    now: datetime,
    priority: int | None,
    actor: str,
) -> Coalesced:
    starts = coalesce.starts_at(config, first_at=now, now=now)
    window.generation += 1
    # Row and generation make the instance id: deterministic for the window, never reused.
    window.instance_id = f"{_ID_SAFE.sub('-', window.source)[:60]}-{config.mode}-{window.pk}-{window.generation}"
    window.mode, window.workflow, window.tenant = config.mode, workflow, tenant
    window.count, window.bytes, window.first_at, window.last_at, window.starts_at = 1, size, now, now, starts
    window.payloads = [payload] if config.mode == BATCH else []
    engine_services.instance_create(
        workflow=workflow,
        id=window.instance_id,
        params=_params(config, window, payload),
        tenant=tenant,
        priority=priority,
        start_at=starts,
        actor=actor,
    )
    window.save()
    return Coalesced(window.instance_id, config.mode, window.key, 1, starts, opened=True)


def coalesce_windows_sweep(*, now: datetime, idle: timedelta = IDLE) -> int:
    """Forget the rows of keys that have had no event for `idle` and no pending instance (the
    scheduler calls this with its purge); a key that comes back gets a new row."""
    pending = Instance.objects.filter(status=Status.QUEUED, started_at__isnull=True).values("id")
    deleted, _ = CoalesceWindow.objects.filter(last_at__lt=now - idle).exclude(instance_id__in=pending).delete()
    return deleted
