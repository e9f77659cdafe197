"""Reads of the triggers app: plain data for views, the API and the scheduler."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from ingest.engine.models import FINISHED_STATUSES, Instance
from ingest.triggers import cron
from ingest.triggers.models import ApiToken, Route, Schedule, Subscription


@dataclass(frozen=True)
class Outcome:
    instance_id: str
    status: str
    output: Any
    error: dict[str, str] | None
    finished: bool


def instance_outcome(*, instance_id: str) -> Outcome | None:
    row = Instance.objects.filter(pk=instance_id).values("status", "output", "error_name", "error_message").first()
    if row is None:
        return None
    error = (
        {"name": row["error_name"], "message": row["error_message"]}
        if row["error_name"] or row["error_message"]
        else None
    )
    return Outcome(instance_id, row["status"], row["output"], error, row["status"] in FINISHED_STATUSES)


_sleep: Callable[[float], None] = time.sleep  # tests swap in a step of the worker


def instance_outcome_wait(
    *,
    instance_id: str,
    timeout: float,
    poll: float = 0.05,
    clock: Callable[[], float] = time.monotonic,
) -> Outcome | None:
    """Poll the ledger until the instance finishes or `timeout` passes; the last outcome read.

    Each read is its own autocommit query: the caller holds no transaction (and no lock) while
    it waits, so the worker can commit the result. The poll interval backs off to 0.5 s.
    """
    deadline = clock() + timeout
    outcome = instance_outcome(instance_id=instance_id)
    while outcome is not None and not outcome.finished and clock() < deadline:
        _sleep(min(poll, max(0.0, deadline - clock())))
        poll = min(poll * 1.5, 0.5)
        outcome = instance_outcome(instance_id=instance_id)
    return outcome


def route_list() -> QuerySet[Route]:
    return Route.objects.order_by("name")


@dataclass(frozen=True)
class ScheduleRow:
    name: str
    workflow: str
    cron: str
    timezone: str
    tenant: str
    enabled: bool
    params: dict[str, Any]
    missed_fire_policy: str
    catch_up_limit: int
    last_fire_at: datetime | None
    last_instance_id: str
    last_error: str
    next_fires: list[datetime]


def _row(schedule: Schedule, *, now: datetime, upcoming: int) -> ScheduleRow:
    fires = cron.upcoming(schedule, now=now, count=upcoming) if schedule.enabled else []
    return ScheduleRow(
        schedule.name,
        schedule.workflow,
        schedule.cron,
        schedule.timezone,
        schedule.tenant,
        schedule.enabled,
        schedule.params,
        schedule.missed_fire_policy,
        schedule.catch_up_limit,
        schedule.last_fire_at,
        schedule.last_instance_id,
        schedule.last_error,
        fires,
    )


def schedule_list(*, now: datetime, tenants: list[str] | None = None, upcoming: int = 3) -> list[ScheduleRow]:
    """Schedules with their next fire times; `tenants=None` means every tenant."""
    qs = Schedule.objects.order_by("name")
    if tenants is not None:
        qs = qs.filter(tenant__in=tenants)
    return [_row(s, now=now, upcoming=upcoming) for s in qs]


def schedule_get(*, name: str, now: datetime, upcoming: int = 5) -> ScheduleRow | None:
    schedule = Schedule.objects.filter(name=name).first()
    return None if schedule is None else _row(schedule, now=now, upcoming=upcoming)


def schedule_due_ids(*, now: datetime) -> list[int]:
    """Schedules with a fire due now (or never computed)."""
    return list(
        Schedule.objects.filter(enabled=True)
        .filter(Q(next_fire_at__lte=now) | Q(next_fire_at__isnull=True))
        .order_by("next_fire_at", "pk")
        .values_list("pk", flat=True)
    )


def subscription_list(*, event_type: str | None = None) -> list[Subscription]:
    from ingest.triggers import patterns

    subs = list(Subscription.objects.filter(enabled=True).order_by("pk"))
    if event_type is None:
        return subs
    return [s for s in subs if patterns.type_matches(s.pattern, event_type)]


@dataclass(frozen=True)
class ApiTokenRow:
    """A user's API token as a list shows it: its prefix, never its secret (only a hash is kept)."""

    id: int
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None
    state: str  # "active", "expired" or "revoked"


def api_token_list(*, user: Any, now: datetime) -> list[ApiTokenRow]:
    """`user`'s tokens, live ones first, each group newest first."""
    rows = []
    for t in ApiToken.objects.filter(user=user).order_by("-created_at", "-pk"):
        state = (
            "revoked"
            if t.revoked_at is not None
            else "expired"
            if t.expires_at is not None and t.expires_at <= now
            else "active"
        )
        rows.append(
            ApiTokenRow(
                id=t.pk,
                name=t.name,
                prefix=t.token_prefix,
                created_at=t.created_at,
                last_used_at=t.last_used_at,
                expires_at=t.expires_at,
                revoked_at=t.revoked_at,
                state=state,
            )
        )
    return sorted(rows, key=lambda r: r.state != "active")
