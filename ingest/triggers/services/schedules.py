"""Cron schedules: define, enable, run now, and fire what is due (the Scheduler calls that)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction

from ingest.engine import EngineError, InstanceAlreadyExists, redact
from ingest.engine.services import instances as engine_services
from ingest.triggers import cron
from ingest.triggers.errors import InvalidSchedule, ScheduleExists, ScheduleNotFound, TriggerError
from ingest.triggers.field_checks import (
    UNSET,
    tenant_problem,
    whole_between,
    wholes,
    workflow_problem,
)
from ingest.triggers.limits import RESERVED_PARAMS
from ingest.triggers.models import MissedFirePolicy, Schedule

log = logging.getLogger("runledger.scheduler")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,59}$")
NAME_PATTERN = _NAME.pattern
# Names that are the console's own addresses (/schedules/new/), not a schedule's page.
RESERVED_NAMES = frozenset({"new"})
EDITABLE = ("workflow", "cron", "timezone", "params", "enabled", "missed_fire_policy", "catch_up_limit")
CATCH_UP_MAX = 100
CRON_MAX = 200
TIMEZONE_MAX = 64


def _time_problems(fields: dict[str, Any], problems: dict[str, str]) -> None:
    if "cron" in fields:
        if not isinstance(fields["cron"], str) or len(fields["cron"]) > CRON_MAX:
            problems["cron"] = f"a cron expression is text of at most {CRON_MAX} characters, e.g. '0 3 * * *'"
        else:
            try:
                cron.validate_cron(fields["cron"])
            except TriggerError as exc:
                problems["cron"] = str(exc)
    if "timezone" in fields:
        if not isinstance(fields["timezone"], str) or len(fields["timezone"]) > TIMEZONE_MAX:
            problems["timezone"] = "a time zone is an IANA name such as UTC or Europe/Paris"
        else:
            try:
                cron.zone(fields["timezone"])
            except TriggerError as exc:
                problems["timezone"] = str(exc)


def schedule_problems(fields: dict[str, Any], *, name: Any = UNSET, tenant: Any = UNSET) -> dict[str, str]:
    """What is wrong with a schedule's fields, by field name (empty when nothing is); `name` and
    `tenant` are checked when given. Pure, except that the workflow must be registered here."""
    problems: dict[str, str] = {}
    if name is not UNSET:
        try:
            schedule_name_check(name)
        except InvalidSchedule as exc:
            problems["name"] = str(exc)
    if tenant is not UNSET and (problem := tenant_problem(tenant)):
        problems["tenant"] = problem
    if "workflow" in fields and (problem := workflow_problem(fields["workflow"])):
        problems["workflow"] = problem
    _time_problems(fields, problems)
    params = fields.get("params", {})
    if not isinstance(params, dict):
        problems["params"] = 'the params are a JSON object such as {"customer": "acme"}'
    elif reserved := [key for key in RESERVED_PARAMS if key in params]:
        problems["params"] = (
            f"the keys {', '.join(reserved)} are reserved: the engine sets them on the instances it "
            "starts ('_schedule': the fire's cron and scheduled time); rename them"
        )
    if "enabled" in fields and not isinstance(fields["enabled"], bool):
        problems["enabled"] = "true or false"
    if fields.get("missed_fire_policy", MissedFirePolicy.SKIP) not in MissedFirePolicy.values:
        problems["missed_fire_policy"] = (
            f"missed_fire_policy {str(fields['missed_fire_policy'])[:40]!r} is "
            f"unknown; use one of {', '.join(MissedFirePolicy.values)}"
        )
    if not whole_between(fields.get("catch_up_limit", 1), 1, CATCH_UP_MAX):
        problems["catch_up_limit"] = f"a catch-up limit is a whole number from 1 to {CATCH_UP_MAX}"
    unknown = set(fields) - set(EDITABLE)
    if unknown:
        problems["__all__"] = f"schedule fields {sorted(unknown)} are unknown; use {list(EDITABLE)}"
    return problems


def _refresh_next(schedule: Schedule, *, now: datetime) -> None:
    fires = cron.upcoming(schedule, now=now, count=1) if schedule.enabled else []
    # None also when the expression matches no date: the scheduler then looks at it each tick
    # and finds nothing to fire.
    schedule.next_fire_at = fires[0] if fires else None


def schedule_create(
    *,
    name: Any,
    workflow: Any,
    cron_expression: Any,
    now: datetime,
    timezone: Any = "UTC",
    params: Any = UNSET,
    tenant: Any = "default",
    enabled: Any = True,
    missed_fire_policy: Any = MissedFirePolicy.SKIP,
    catch_up_limit: Any = 1,
) -> Schedule:
    """A new schedule; it fires from `now` on (nothing before its creation is ever missed).

    InvalidSchedule names every wrong field at once; ScheduleExists when the name is taken and
    nothing else is wrong. Nothing is written on either."""
    fields = {
        "workflow": workflow,
        "cron": cron_expression,
        "timezone": timezone,
        "params": {} if params is UNSET else params,
        "enabled": enabled,
        "missed_fire_policy": missed_fire_policy,
        "catch_up_limit": catch_up_limit,
    }
    problems = schedule_problems(fields, name=name, tenant=tenant)
    if "name" not in problems and Schedule.objects.filter(name=name).exists():
        taken = f"a schedule is already named {name!r}; pick another name"
        if not problems:
            raise ScheduleExists(problems={"name": taken})
        problems["name"] = taken
    if problems:
        raise InvalidSchedule(problems=problems)
    fields = wholes(fields, ("catch_up_limit",))
    fields["cron"] = cron.validate_cron(cron_expression)
    schedule = Schedule(name=name, tenant=tenant, checked_until=now, created_at=now, updated_at=now, **fields)
    _refresh_next(schedule, now=now)
    schedule.save()
    return schedule


def schedule_create_from(fields: Mapping[str, Any], *, now: datetime) -> Schedule:
    """`schedule_create` from every field of a new schedule as the REST API's body and the console's
    form name them (the cron expression as `cron`, as `schedule_update` takes it)."""
    return schedule_create(
        name=fields["name"],
        tenant=fields["tenant"],
        cron_expression=fields["cron"],
        now=now,
        **{key: fields[key] for key in EDITABLE if key != "cron"},
    )


def _get_locked(name: str) -> Schedule:
    schedule = Schedule.objects.select_for_update().filter(name=name).first()
    if schedule is None:
        raise ScheduleNotFound(f"no schedule is named {name[:100]!r}")
    return schedule


def schedule_update(*, name: str, now: datetime, **fields: Any) -> Schedule:
    """Change a schedule's fields (not its name or tenant); InvalidSchedule names every wrong
    field at once and changes nothing. Enabling it does not catch up the disabled period."""
    if "cron_expression" in fields:
        fields["cron"] = fields.pop("cron_expression")
    problems = schedule_problems(fields)
    if problems:
        raise InvalidSchedule(problems=problems)
    fields = wholes(fields, ("catch_up_limit",))
    if "cron" in fields:
        fields["cron"] = cron.validate_cron(fields["cron"])
    with transaction.atomic():
        schedule = _get_locked(name)
        if fields.get("enabled") and not schedule.enabled:
            schedule.checked_until = now
        for key, value in fields.items():
            setattr(schedule, key, value)
        schedule.updated_at = now
        _refresh_next(schedule, now=now)
        schedule.save()
    return schedule


def schedule_name_check(name: str) -> str:
    """The name, or InvalidSchedule saying what a schedule's name may be (a pure check)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidSchedule(
            f"schedule name {str(name)[:80]!r} is invalid; use 1 to 60 letters, digits, '_' or '-' "
            "(it prefixes instance ids such as nightly-sync-20261122T0300Z)"
        )
    if name in RESERVED_NAMES:
        raise InvalidSchedule(f"{name!r} is the address of the console's new-schedule form; pick another name")
    return name


def schedule_delete(*, name: str) -> Schedule:
    """Delete a schedule: it fires no more. Instances it started stay, with their history."""
    with transaction.atomic():
        schedule = _get_locked(name)
        deleted = Schedule(
            pk=schedule.pk, name=schedule.name, workflow=schedule.workflow, tenant=schedule.tenant, cron=schedule.cron
        )
        schedule.delete()
    return deleted


def schedule_set_enabled(*, name: str, enabled: bool, now: datetime) -> Schedule:
    """Enable or disable. Re-enabling does not catch up the fires of the disabled period."""
    return schedule_update(name=name, enabled=enabled, now=now)


def _fire(schedule: Schedule, *, scheduled: datetime, instance_id: str, manual: bool, actor: str) -> bool:
    """Create the fire's instance; False when it already existed (an earlier fire, a crash)."""
    params = cron.schedule_payload(
        params=schedule.params, cron=schedule.cron, timezone=schedule.timezone, scheduled=scheduled, manual=manual
    )
    try:
        with transaction.atomic():  # a savepoint: a duplicate must not poison the outer transaction
            engine_services.instance_create(
                workflow=schedule.workflow, id=instance_id, params=params, tenant=schedule.tenant, actor=actor
            )
    except InstanceAlreadyExists:
        return False
    return True


def schedule_run_now(*, name: str, now: datetime, actor: str = "") -> str:
    """Fire once now, outside the cron; the instance id says `manual`."""
    with transaction.atomic():
        schedule = _get_locked(name)
        instance_id = cron.manual_instance_id(schedule.name, now)
        _fire(schedule, scheduled=now, instance_id=instance_id, manual=True, actor=actor or "scheduler:run-now")
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
                _fire(schedule, scheduled=scheduled, instance_id=instance_id, manual=False, actor="scheduler")
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
        schedule.save(update_fields=["last_fire_at", "last_instance_id", "checked_until", "last_error", "next_fire_at"])
    return fired
