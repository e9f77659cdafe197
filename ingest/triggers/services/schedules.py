"""Cron schedules: define, enable, run now, and fire what is due (the Scheduler calls that)."""

from __future__ import annotations

import logging
import re
from datetime import datetime
from typing import Any

from django.db import transaction

from ingest.engine import EngineError, InstanceAlreadyExists, redact
from ingest.engine.services import instances as engine_services
from ingest.triggers import cron
from ingest.triggers.errors import InvalidSchedule, ScheduleNotFound
from ingest.triggers.models import MissedFirePolicy, Schedule

log = logging.getLogger("runledger.scheduler")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,59}$")
_FIELDS = {"workflow", "cron", "timezone", "params", "tenant", "enabled", "missed_fire_policy",
           "catch_up_limit"}


def _validate(schedule: Schedule) -> None:
    schedule_name_check(schedule.name)
    schedule.cron = cron.validate_cron(schedule.cron)
    cron.zone(schedule.timezone)
    if not isinstance(schedule.params, dict):
        raise InvalidSchedule(f"schedule {schedule.name!r}: params must be a JSON object")
    if "_schedule" in schedule.params:
        raise InvalidSchedule(
            f"schedule {schedule.name!r}: the params key '_schedule' is reserved for the fire's "
            "cron and scheduled time; rename it"
        )
    if schedule.missed_fire_policy not in MissedFirePolicy.values:
        raise InvalidSchedule(
            f"schedule {schedule.name!r}: missed_fire_policy {schedule.missed_fire_policy!r} is "
            f"unknown; use one of {', '.join(MissedFirePolicy.values)}"
        )
    if not schedule.workflow:
        raise InvalidSchedule(f"schedule {schedule.name!r} names no workflow")


def _refresh_next(schedule: Schedule, *, now: datetime) -> None:
    schedule.next_fire_at = cron.upcoming(schedule, now=now, count=1)[0] if schedule.enabled else None


def schedule_create(*, name: str, workflow: str, cron_expression: str, now: datetime,
                    timezone: str = "UTC", params: dict[str, Any] | None = None,
                    tenant: str = "default", enabled: bool = True,
                    missed_fire_policy: str = MissedFirePolicy.SKIP,
                    catch_up_limit: int = 1) -> Schedule:
    """A new schedule; it fires from `now` on (nothing before its creation is ever missed)."""
    schedule = Schedule(
        name=name, workflow=workflow, cron=cron_expression, timezone=timezone,
        params=params if params is not None else {}, tenant=tenant, enabled=enabled,
        missed_fire_policy=missed_fire_policy, catch_up_limit=catch_up_limit,
        checked_until=now, created_at=now, updated_at=now,
    )
    _validate(schedule)
    if Schedule.objects.filter(name=name).exists():
        raise InvalidSchedule(f"a schedule is already named {name!r}; pick another name")
    _refresh_next(schedule, now=now)
    schedule.save()
    return schedule


def _get_locked(name: str) -> Schedule:
    schedule = Schedule.objects.select_for_update().filter(name=name).first()
    if schedule is None:
        raise ScheduleNotFound(f"no schedule is named {name[:100]!r}")
    return schedule


def schedule_update(*, name: str, now: datetime, **fields: Any) -> Schedule:
    unknown = set(fields) - _FIELDS - {"cron_expression"}
    if unknown:
        raise InvalidSchedule(f"schedule fields {sorted(unknown)} are unknown; use {sorted(_FIELDS)}")
    if "cron_expression" in fields:
        fields["cron"] = fields.pop("cron_expression")
    with transaction.atomic():
        schedule = _get_locked(name)
        for key, value in fields.items():
            setattr(schedule, key, value)
        _validate(schedule)
        schedule.updated_at = now
        _refresh_next(schedule, now=now)
        schedule.save()
    return schedule


def schedule_name_check(name: str) -> str:
    """The name, or InvalidSchedule saying what a schedule's name may be (a pure check)."""
    if not _NAME.match(name or ""):
        raise InvalidSchedule(
            f"schedule name {name!r} is invalid; use 1 to 60 letters, digits, '_' or '-' "
            "(it prefixes instance ids such as nightly-sync-20261122T0300Z)"
        )
    return name


def schedule_delete(*, name: str) -> Schedule:
    """Delete a schedule: it fires no more. Instances it started stay, with their history."""
    with transaction.atomic():
        schedule = _get_locked(name)
        deleted = Schedule(pk=schedule.pk, name=schedule.name, workflow=schedule.workflow,
                           tenant=schedule.tenant, cron=schedule.cron)
        schedule.delete()
    return deleted


def schedule_set_enabled(*, name: str, enabled: bool, now: datetime) -> Schedule:
    """Enable or disable. Re-enabling does not catch up the fires of the disabled period."""
    with transaction.atomic():
        schedule = _get_locked(name)
        if enabled and not schedule.enabled:
            schedule.checked_until = now
        schedule.enabled = enabled
        schedule.updated_at = now
        _refresh_next(schedule, now=now)
        schedule.save()
    return schedule


def _fire(schedule: Schedule, *, scheduled: datetime, instance_id: str, manual: bool,
          actor: str) -> bool:
    """Create the fire's instance; False when it already existed (an earlier fire, a crash)."""
    params = cron.schedule_payload(params=schedule.params, cron=schedule.cron,
                                   timezone=schedule.timezone, scheduled=scheduled, manual=manual)
    try:
        with transaction.atomic():  # a savepoint: a duplicate must not poison the outer transaction
            engine_services.instance_create(workflow=schedule.workflow, id=instance_id,
                                            params=params, tenant=schedule.tenant, actor=actor)
    except InstanceAlreadyExists:
        return False
    return True


def schedule_run_now(*, name: str, now: datetime, actor: str = "") -> str:
    """Fire once now, outside the cron; the instance id says `manual`."""
    with transaction.atomic():
        schedule = _get_locked(name)
        instance_id = cron.manual_instance_id(schedule.name, now)
        _fire(schedule, scheduled=now, instance_id=instance_id, manual=True,
              actor=actor or "scheduler:run-now")
        schedule.last_instance_id = instance_id
        schedule.save(update_fields=["last_instance_id"])
    return instance_id


def schedule_fire_due(*, schedule_id: int, now: datetime) -> list[str]:
    """Fire every due time of one schedule; the instance ids of those fires (new or not).

    The schedule row stays locked while it fires, and each fire's id is deterministic, so two
    schedulers (or one restarted mid-fire) cannot start a scheduled time twice.
    """
    fired: list[str] = []
    with transaction.atomic():
        schedule = Schedule.objects.select_for_update().filter(pk=schedule_id).first()
        if schedule is None or not schedule.enabled:
            return fired
        after = schedule.checked_until or schedule.created_at
        if now <= after:
            return fired
        try:
            for scheduled in cron.next_fires(schedule, after=after, now=now):
                instance_id = cron.fire_instance_id(schedule.name, scheduled)
                _fire(schedule, scheduled=scheduled, instance_id=instance_id, manual=False,
                      actor="scheduler")
                fired.append(instance_id)
                schedule.last_fire_at = scheduled
                schedule.last_instance_id = instance_id
            schedule.last_error = ""
            schedule.checked_until = now
            _refresh_next(schedule, now=now)
        except EngineError as exc:
            # Keep `checked_until` and the past `next_fire_at`: the next tick tries again.
            log.warning("schedule %s could not fire: %s", schedule.name, exc)
            schedule.last_error = redact(str(exc))[:2000]
        schedule.save(update_fields=["last_fire_at", "last_instance_id", "checked_until",
                                     "last_error", "next_fire_at"])
    return fired
