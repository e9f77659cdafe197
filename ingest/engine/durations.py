"""Durations as Cloudflare accepts them: "5 seconds", "1 hour", "2 days", numbers (seconds), timedelta."""

from __future__ import annotations

import re
from datetime import timedelta

from ingest.engine.errors import InvalidDuration

_UNITS = {
    "millisecond": 0.001,
    "ms": 0.001,
    "second": 1.0,
    "sec": 1.0,
    "s": 1.0,
    "minute": 60.0,
    "min": 60.0,
    "m": 60.0,
    "hour": 3600.0,
    "h": 3600.0,
    "day": 86400.0,
    "d": 86400.0,
    "week": 7 * 86400.0,
    "w": 7 * 86400.0,
    "month": 30 * 86400.0,
    "year": 365 * 86400.0,
}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")

Duration = str | int | float | timedelta


def parse_duration(value: object, *, what: str = "duration") -> timedelta:
    """Parse a duration; raise InvalidDuration naming `what` and the value at fault."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise InvalidDuration(f"{what} {value!r} is not a duration")
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_text(value, what=what)
    else:
        raise InvalidDuration(
            f"{what} {value!r} is not a duration; use '5 seconds', '1 hour', a number of seconds or a timedelta"
        )
    if seconds < 0 or seconds != seconds:
        raise InvalidDuration(f"{what} {value!r} is negative or not a number")
    return timedelta(seconds=seconds)


def _parse_text(text: str, *, what: str) -> float:
    match = _PATTERN.match(text.lower())
    # The unit as written, else without a plural s ("ms" is milliseconds, "mins" minutes; a lazy
    # pattern once read "500 ms" as 500 minutes).
    unit = match.group(2) if match is not None else ""
    if unit not in _UNITS and unit.endswith("s"):
        unit = unit[:-1]
    if match is None or unit not in _UNITS:
        raise InvalidDuration(
            f"{what} {text!r} is not a duration; write a number and a unit such as "
            "'250 milliseconds', '5 seconds', '10 minutes', '1 hour', '2 days', '1 week'"
        )
    return float(match.group(1)) * _UNITS[unit]
