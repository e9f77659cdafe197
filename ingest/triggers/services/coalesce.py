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
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from ingest.engine.models import Instance, Status
from ingest.engine.services import instances as engine_services
from ingest.triggers import coalesce
from ingest.triggers.coalesce import BATCH, CoalesceConfig
from ingest.triggers.models import CoalesceWindow

_ID_SAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class Coalesced:
    """Where one event went: the instance of its window, and the window's state after it."""

    instance_id: str
    mode: str
    key: str
    count: int  # events in the window, this one included
    starts_at: datetime
    opened: bool  # this event opened the window (and created the instance)


def coalesce_add(*, source: str, config: CoalesceConfig, workflow: str, tenant: str, payload: dict[str, Any],
                 now: datetime, priority: int | None = None, actor: str = "") -> Coalesced:
    """Add one event to its key's window of `source`; opens the window (and creates its queued
    instance) when none is open. Runs in the caller's transaction when there is one."""
    key = coalesce.key_of(config, payload)
    size = len(json.dumps(payload, separators=(",", ":")))
    for _ in range(5):
        try:
            with transaction.atomic():
                window = CoalesceWindow.objects.select_for_update().filter(source=source, key=key).first()
                if window is not None:
                    # A window whose start time has come is closed even before a worker starts
                    # its instance: the quiet period passed, or the timeout capped it.
                    joined = _join(window, config, payload, size=size, now=now) if window.starts_at > now else None
                    if joined is not None:
                        return joined
                    window.delete()  # closed or started: this event opens the next window
                return _open(source=source, key=key, config=config, workflow=workflow, tenant=tenant,
                             payload=payload, size=size, now=now, priority=priority, actor=actor)
        except IntegrityError:
            continue  # a concurrent first event opened the window: join it
    raise IntegrityError(f"the {config.mode} window {source} [{key}] is contended; retry the event")


def _params(config: CoalesceConfig, window: CoalesceWindow, payload: dict[str, Any]) -> dict[str, Any]:
    meta = {"key": window.key, "count": window.count, "first_at": window.first_at.isoformat(),
            "last_at": window.last_at.isoformat(), "source": window.source}
    if config.mode == BATCH:
        return {"events": list(window.payloads), "_batch": meta}
    return {**payload, "_debounce": meta}


def _join(window: CoalesceWindow, config: CoalesceConfig, payload: dict[str, Any], *, size: int,
          now: datetime) -> Coalesced | None:
    full = config.mode == BATCH and (window.count + 1 >= config.max_size
                                     or window.bytes + size >= coalesce.MAX_BATCH_BYTES)
    window.count += 1
    window.last_at = now
    window.bytes += size
    if config.mode == BATCH:
        window.payloads = [*window.payloads, payload]
    starts = now if full else coalesce.starts_at(config, first_at=window.first_at, now=now)
    if not engine_services.instance_defer(instance_id=window.instance_id,
                                          params=_params(config, window, payload), start_at=starts):
        return None
    window.starts_at = starts
    if full:
        window.delete()  # the batch is full: it starts now, the next event opens another
    else:
        window.save(update_fields=["count", "last_at", "bytes", "payloads", "starts_at"])
    return Coalesced(window.instance_id, config.mode, window.key, window.count, starts, opened=False)


def _open(*, source: str, key: str, config: CoalesceConfig, workflow: str, tenant: str,
          payload: dict[str, Any], size: int, now: datetime, priority: int | None, actor: str) -> Coalesced:
    starts = coalesce.starts_at(config, first_at=now, now=now)
    window = CoalesceWindow.objects.create(
        source=source, key=key, mode=config.mode, instance_id="", workflow=workflow, tenant=tenant, count=1,
        payloads=[payload] if config.mode == BATCH else [], bytes=size, first_at=now, last_at=now, starts_at=starts,
    )
    # The window's row id makes the instance id: deterministic for the window, never reused.
    window.instance_id = f"{_ID_SAFE.sub('-', source)[:60]}-{config.mode}-{window.pk}"
    window.save(update_fields=["instance_id"])
    engine_services.instance_create(workflow=workflow, id=window.instance_id,
                                    params=_params(config, window, payload), tenant=tenant,
                                    priority=priority, start_at=starts, actor=actor)
    return Coalesced(window.instance_id, config.mode, key, 1, starts, opened=True)


def coalesce_windows_sweep() -> int:
    """Delete windows whose instance has started (or is gone); the next event would delete each
    anyway. The scheduler calls this with its purge, so the open windows listed are open."""
    pending = Instance.objects.filter(status=Status.QUEUED, started_at__isnull=True).values("id")
    deleted, _ = CoalesceWindow.objects.exclude(instance_id__in=pending).delete()
    return deleted
