"""Cron decisions as pure functions of a schedule and `now`: validation, due fires, fire ids.

A fire is *on time* when its scheduled time is within `GRACE` of now; older ones were *missed*
(no scheduler ran then). The schedule's missed-fire policy says what happens to those: `skip`
drops them, `catch_up` runs the latest `catch_up_limit` of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from ingest.triggers.errors import InvalidCron, InvalidTimezone

GRACE = timedelta(seconds=60)
# Walking back over a years-old `after` must stay cheap: never look further than this many fires.
MAX_SCAN = 2000
FIELDS = "minute hour day-of-month month day-of-week"


class CronSpec(Protocol):
    cron: str
    timezone: str
    missed_fire_policy: str
    catch_up_limit: int


@dataclass(frozen=True)
class Spec:
    """A schedule's timing, for callers without a Schedule row."""

    cron: str
    timezone: str = "UTC"
    missed_fire_policy: str = "skip"
    catch_up_limit: int = 1


def validate_cron(expression: str) -> str:
    """The expression, stripped, or InvalidCron saying what is wrong and what is expected."""
    expr = " ".join((expression or "").split())
    fields = expr.split(" ") if expr else []
    if len(fields) != 5 and not (len(fields) == 1 and expr.startswith("@")):
        raise InvalidCron(
            f"cron expression {expression!r} has {len(fields)} fields; use five fields "
            f"({FIELDS}), e.g. '0 3 * * *' for 03:00 every day"
        )
    try:
        croniter(expr)
    except (CroniterError, ValueError, KeyError) as exc:
        raise InvalidCron(
            f"cron expression {expression!r} is invalid ({exc}); use five fields ({FIELDS}), "
            "e.g. '*/15 * * * *' for every 15 minutes"
        ) from None
    return expr


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidTimezone(
            f"time zone {name!r} is unknown; use an IANA name such as UTC or Europe/Paris"
        ) from None


def next_fires(
    schedule: CronSpec, *, after: datetime, now: datetime, grace: timedelta = GRACE
) -> list[datetime]:
    """Scheduled times in (after, now] that should fire now, oldest first, in UTC."""
    tz = zone(schedule.timezone)
    start = now.replace(microsecond=0) + timedelta(seconds=1)
    it = croniter(schedule.cron, start.astimezone(tz))
    keep_missed = schedule.catch_up_limit if schedule.missed_fire_policy == "catch_up" else 0
    on_time: list[datetime] = []
    missed: list[datetime] = []
    for _ in range(MAX_SCAN):
        when = it.get_prev(datetime).astimezone(UTC)
        if when <= after:
            break
        if when > now:
            continue
        if when > now - grace:
            on_time.append(when)
        elif len(missed) < keep_missed:
            missed.append(when)
        else:
            break
    return sorted(missed + on_time)


def upcoming(schedule: CronSpec, *, now: datetime, count: int = 5) -> list[datetime]:
    """The next `count` scheduled times after now, in UTC (for display)."""
    it = croniter(schedule.cron, now.astimezone(zone(schedule.timezone)))
    return [it.get_next(datetime).astimezone(UTC) for _ in range(count)]


def fire_instance_id(schedule_name: str, scheduled: datetime) -> str:
    """`nightly-sync-20261122T0300Z`: the same fire always gets the same id, so it cannot double."""
    return f"{schedule_name}-{scheduled.astimezone(UTC):%Y%m%dT%H%MZ}"


def manual_instance_id(schedule_name: str, now: datetime) -> str:
    return f"{schedule_name}-manual-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}"


def schedule_payload(
    *, params: dict[str, object], cron: str, timezone: str, scheduled: datetime, manual: bool = False
) -> dict[str, object]:
    """Params plus the reserved `_schedule` key, as Cloudflare's `event.schedule`."""
    return {
        **params,
        "_schedule": {
            "cron": cron,
            "timezone": timezone,
            "scheduled_time": scheduled.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "manual": manual,
        },
    }
