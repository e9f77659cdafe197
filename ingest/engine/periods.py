"""Budget periods: where the current hour, day or month began (UTC)."""

from __future__ import annotations

from datetime import UTC, datetime


def period_start(period: str, now: datetime) -> datetime:
    now = now.astimezone(UTC)
    if period == "hour":
        return now.replace(minute=0, second=0, microsecond=0)
    if period == "day":
        return now.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "month":
        return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    raise ValueError(f"budget period {period!r} is not one of hour, day, month")


def period_end(period: str, now: datetime) -> datetime:
    start = period_start(period, now)
    if period == "hour":
        from datetime import timedelta

        return start + timedelta(hours=1)
    if period == "day":
        from datetime import timedelta

        return start + timedelta(days=1)
    year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
    return start.replace(year=year, month=month)
