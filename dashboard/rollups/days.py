"""Local days made of UTC hours: a day is the hours that *start* on it in the deployment's zone.

Wherever the zone's offset is whole hours (nearly everywhere) these are exactly the local day's
hours; in a zone offset by a half or quarter hour, a day is the UTC hours starting on it.
The costs chart's daily buckets follow the same definition, so rollup and ledger agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from django.utils import timezone

from dashboard.rollups.dirty import hour_of

HOUR = timedelta(hours=1)


def zone() -> tzinfo:
    return timezone.get_default_timezone()


def zone_name() -> str:
    return str(timezone.get_default_timezone_name())


def day_of(hour: datetime, tz: tzinfo) -> date:
    return hour.astimezone(tz).date()


def hours_of_day(day: date, tz: tzinfo) -> list[datetime]:
    """The UTC hours that start on `day` in `tz` (23, 24 or 25 of them)."""
    start = hour_of(datetime.combine(day, time(), tz).astimezone(UTC)) - HOUR
    end = datetime.combine(day + timedelta(days=1), time(), tz).astimezone(UTC) + HOUR
    out, h = [], start
    while h < end:
        if day_of(h, tz) == day:
            out.append(h)
        h += HOUR
    return out


def days_of(hours: Iterable[datetime], tz: tzinfo) -> set[date]:
    return {day_of(h, tz) for h in hours}
