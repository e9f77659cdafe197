"""One rule for the URL query of every console page: each parameter a page reads is parsed here,
and each value that does not parse is named with its parameter. The page then answers 400 inside
the layout listing every bad parameter (`dashboard.guard` renders `BadQuery` as it renders every
refused input; JSON under /api/), never a wider answer, a default in its place, or a truncation.

An empty value counts as absent: a filter form submits its empty fields, and an empty field
filters nothing. A parameter a page does not read is not looked at.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, tzinfo
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ingest.triggers.errors import InputRejected
from ingest.triggers.limits import datetime_in_range

SHOWN_CHARS = 60


class BadQuery(InputRejected):
    """The page's URL query has values that do not parse."""

    code = "bad_query"

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems) or None)


def shown(value: str) -> str:
    """`value` as a message quotes it: repr-quoted (a NUL shows as \\x00), cut to SHOWN_CHARS."""
    return repr(value[:SHOWN_CHARS] + ("…" if len(value) > SHOWN_CHARS else ""))


def when_parse(raw: str, *, name: str, naive_as: tzinfo = UTC) -> datetime:
    """`raw` (ISO 8601: a date, or a date and time; no zone means `naive_as`, UTC unless the page
    labels its fields otherwise) as an aware datetime, or ValueError saying what is wrong with it."""
    try:
        value = parse_datetime(raw)
    except ValueError:
        value = None
    if value is None:
        raise ValueError(f"{name}={shown(raw)} is not a date or time (e.g. 2026-03-01 or 2026-03-01T09:30)")
    try:
        datetime_in_range(value, what=name)  # 9999-12-31 overflows the ORM's conversion
    except InputRejected as exc:
        raise ValueError(str(exc)) from exc
    return timezone.make_aware(value, naive_as) if timezone.is_naive(value) else value


class QueryReader:
    """Reads a page's parameters from `query` (a QueryDict or a plain mapping), keeping every
    problem; `done()` raises them all at once as BadQuery."""

    def __init__(self, query: Mapping[str, Any]) -> None:
        self.query = query
        self.problems: list[str] = []

    def raw(self, name: str) -> str:
        value = self.query.get(name)
        return "" if value is None else str(value).strip()

    def choice(self, name: str, allowed: Iterable[str], default: str = "") -> str:
        allowed = tuple(allowed)
        raw = self.raw(name)
        if not raw:
            return default
        if raw not in allowed:
            self.problems.append(f"{name}={shown(raw)} is not one of {', '.join(allowed)}")
            return default
        return raw

    def integer(self, name: str, *, default: int, low: int, high: int) -> int:
        raw = self.raw(name)
        if not raw:
            return default
        if not (raw.isascii() and raw.isdigit() and len(raw) <= len(str(high)) and low <= int(raw) <= high):
            self.problems.append(f"{name}={shown(raw)} is not a whole number from {low} to {high:,}")
            return default
        return int(raw)

    def when(self, name: str, *, naive_as: tzinfo = UTC) -> datetime | None:
        raw = self.raw(name)
        if not raw:
            return None
        try:
            return when_parse(raw, name=name, naive_as=naive_as)
        except ValueError as exc:
            self.problems.append(str(exc))
            return None

    def text(self, name: str, *, max_chars: int) -> str:
        raw = self.raw(name)
        if len(raw) > max_chars:
            self.problems.append(f"{name} is {len(raw):,} characters long; at most {max_chars:,}")
            return ""
        return raw

    def problem(self, message: str) -> None:
        """A problem a page finds itself (a value valid alone but not with another)."""
        self.problems.append(message)

    def done(self) -> None:
        if self.problems:
            raise BadQuery(self.problems)
