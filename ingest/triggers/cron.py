"""Cron decisions as pure functions of a schedule and `now`: validation, due fires, fire ids.

A fire is *on time* when its scheduled time is within `GRACE` of now; older ones were *missed*
(no scheduler ran then). The schedule's missed-fire policy says what happens to those: `skip`
drops them, `catch_up` runs the latest `catch_up_limit` of them.

Expressions are Cloudflare's: five fields with the Quartz extensions `L` (last day of the month),
`15W` (weekday nearest the 15th), `LW` (last weekday of the month), `5#3` (third Friday) and `5L`
(last Friday). croniter 7 reads all of them but `LW` and `5L`; `plan` rewrites those two into
what croniter reads plus, for `LW`, a day filter applied while iterating.

An expression may be valid and match no date at all (`0 0 31 2 *`, February 31st; `0 0 1 2 1#5`,
a February 1st that is the month's fifth Monday). As Kubernetes and Temporal do, such a schedule
is kept and never fires: its list of next fires is empty and the console says so.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter

from ingest.triggers.errors import InvalidCron, InvalidTimezone

GRACE = timedelta(seconds=60)
# Walking back over a years-old `after` must stay cheap: never look further than this many fires.
MAX_SCAN = 2000
FIELDS = "minute hour day-of-month month day-of-week"
# A month's last weekday is never before the 26th (February's 28th falling on a Sunday).
_LAST_WEEKDAY_CANDIDATES = "26-31"
_DAY_NAMES = {name: str(i) for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_DOW_LAST = re.compile(r"^([0-7]|sun|mon|tue|wed|thu|fri|sat)l$", re.IGNORECASE)
# A filtered expression skips whole days; a year of days bounds the walk to the next kept one.
_MAX_SKIPPED_DAYS = 400


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


def last_weekday(day: date) -> bool:
    """Whether `day` is its month's last Monday-to-Friday (Quartz `LW`)."""
    last = date(day.year, day.month, calendar.monthrange(day.year, day.month)[1])
    return day == last - timedelta(days=max(0, last.weekday() - 4))


@dataclass(frozen=True)
class Plan:
    """What croniter is given for an expression, and which days it keeps of croniter's answer."""

    expression: str
    keep_day: Callable[[date], bool] | None = None


def _dow_field(field: str) -> str:
    items = []
    for item in field.split(","):
        last = _DOW_LAST.match(item)
        # Quartz writes the last Friday `5L`; croniter reads it as `L5`.
        items.append(f"L{_DAY_NAMES.get(last.group(1).lower(), last.group(1))}" if last else item)
    return ",".join(items)


def plan(expression: str) -> Plan:
    """The croniter form of a five-field expression already split on spaces."""
    fields = expression.split(" ")
    if len(fields) != 5:
        return Plan(expression)
    minute, hour, dom, month, dow = fields
    dow = _dow_field(dow)
    if dom.upper() == "LW":
        if dow != "*":
            raise InvalidCron(
                f"cron expression {expression!r} combines LW with a day of week; use '*' as the "
                "day of week with LW (last weekday of the month), e.g. '59 23 LW * *'"
            )
        return Plan(" ".join((minute, hour, _LAST_WEEKDAY_CANDIDATES, month, dow)), last_weekday)
    if "lw" in dom.lower():
        raise InvalidCron(
            f"cron expression {expression!r}: LW stands alone in the day-of-month field "
            "(the last weekday of the month), e.g. '59 23 LW * *'"
        )
    return Plan(" ".join((minute, hour, dom, month, dow)))


class CronIter:
    """croniter, with the days a plan's filter refuses skipped whole."""

    def __init__(self, expression: str, start: datetime) -> None:
        self._plan = plan(expression)
        self._it = croniter(self._plan.expression, start)

    def _restart(self, start: datetime) -> None:
        self._it = croniter(self._plan.expression, start)

    def get_next(self) -> datetime | None:
        """The next matching time; None when the expression matches no later date."""
        try:
            when: datetime = self._it.get_next(datetime)
            keep = self._plan.keep_day
            for _ in range(_MAX_SKIPPED_DAYS):
                if keep is None or keep(when.date()):
                    return when
                midnight = datetime.combine(when.date() + timedelta(days=1), time(0), tzinfo=when.tzinfo)
                self._restart(midnight - timedelta(seconds=1))
                when = self._it.get_next(datetime)
        except CroniterBadDateError:
            return None
        return None

    def get_prev(self) -> datetime | None:
        """The previous matching time; None when the expression matches no earlier date."""
        try:
            when: datetime = self._it.get_prev(datetime)
            keep = self._plan.keep_day
            for _ in range(_MAX_SKIPPED_DAYS):
                if keep is None or keep(when.date()):
                    return when
                self._restart(datetime.combine(when.date(), time(0), tzinfo=when.tzinfo))
                when = self._it.get_prev(datetime)
        except CroniterBadDateError:
            return None
        return None


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
        croniter(plan(expr).expression)
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
        raise InvalidTimezone(f"time zone {name!r} is unknown; use an IANA name such as UTC or Europe/Paris") from None


def next_fires(schedule: CronSpec, *, after: datetime, now: datetime, grace: timedelta = GRACE) -> list[datetime]:
    """Scheduled times in (after, now] that should fire now, oldest first, in UTC."""
    tz = zone(schedule.timezone)
    start = now.replace(microsecond=0) + timedelta(seconds=1)
    it = CronIter(schedule.cron, start.astimezone(tz))
    keep_missed = schedule.catch_up_limit if schedule.missed_fire_policy == "catch_up" else 0
    on_time: list[datetime] = []
    missed: list[datetime] = []
    for _ in range(MAX_SCAN):
        found = it.get_prev()
        if found is None:
            break
        when = found.astimezone(UTC)
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
    """The next `count` scheduled times after now, in UTC; fewer, or none, when the expression
    matches no later date."""
    it = CronIter(schedule.cron, now.astimezone(zone(schedule.timezone)))
    fires = []
    for _ in range(count):
        when = it.get_next()
        if when is None:
            break
        fires.append(when.astimezone(UTC))
    return fires


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
