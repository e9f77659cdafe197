"""Shared by the selectors: money constants, the time windows, and narrowing a queryset by the
filters a page was given."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TypeVar

from django.db.models import Model, QuerySet

M = TypeVar("M", bound=Model)

ZERO = Decimal("0")
MICRO = Decimal("0.000001")  # the ledger stores money with 6 decimals
WINDOWS: dict[str, timedelta] = {
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}


def window_start(window: str, *, now: datetime) -> datetime:
    return now - WINDOWS.get(window, WINDOWS["24h"])


def filter_given(qs: QuerySet[M], lookups: Iterable[tuple[str, object]]) -> QuerySet[M]:
    """`qs` narrowed by every (lookup, value) whose value was given: an empty filter field of a page
    filters nothing. A lookup may come twice (two bounds on one column); each narrows."""
    for lookup, value in lookups:
        if value:
            qs = qs.filter(**{lookup: value})
    return qs
