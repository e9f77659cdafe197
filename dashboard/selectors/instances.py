"""The instances ledger: filters from the URL, keyset pages over (created_at, id), the
"N new" count. Every read is scoped to the requesting user's tenants."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.db.models import Q, QuerySet
from django.http import QueryDict
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from dashboard import access
from dashboard.selectors.common import filter_given
from ingest.engine import workflow_names as workflow_names_registered
from ingest.engine.models import (
    Instance,
    Status,
)
from ingest.triggers.limits import datetime_in_range

PAGE_SIZE = 50
RANGES = {"15m": timedelta(minutes=15), "1h": timedelta(hours=1), "24h": timedelta(hours=24),
          "7d": timedelta(days=7), "30d": timedelta(days=30)}


# ---- the instances ledger ----------------------------------------------------------------


@dataclass(frozen=True)
class InstanceFilters:
    """The list's filters, parsed from and written back to the URL query."""

    workflow: str = ""
    statuses: tuple[str, ...] = ()
    tenant: str = ""
    range: str = ""
    since: datetime | None = None
    until: datetime | None = None
    id_prefix: str = ""
    text: str = ""

    @classmethod
    def from_query(cls, query: QueryDict) -> InstanceFilters:
        statuses = tuple(s for s in query.getlist("status") if s in Status.values)
        rng = query.get("range", "")
        return cls(
            workflow=query.get("workflow", "").strip()[:200],
            statuses=statuses,
            tenant=query.get("tenant", "").strip()[:100],
            range=rng if rng in RANGES else "",
            since=_parse_time(query.get("since", ""), what="since"),
            until=_parse_time(query.get("until", ""), what="until"),
            id_prefix=query.get("id", "").strip()[:100],
            text=query.get("q", "").strip()[:200],
        )

    def as_params(self) -> list[tuple[str, str]]:
        pairs: list[tuple[str, str]] = []
        if self.workflow:
            pairs.append(("workflow", self.workflow))
        pairs += [("status", s) for s in self.statuses]
        for key, value in (("tenant", self.tenant), ("range", self.range), ("id", self.id_prefix), ("q", self.text)):
            if value:
                pairs.append((key, value))
        if self.since:
            pairs.append(("since", self.since.strftime("%Y-%m-%dT%H:%M")))
        if self.until:
            pairs.append(("until", self.until.strftime("%Y-%m-%dT%H:%M")))
        return pairs

    def querystring(self) -> str:
        return urlencode(self.as_params())

    @property
    def active(self) -> bool:
        return bool(self.as_params())


def _parse_time(raw: str, *, what: str) -> datetime | None:
    raw = raw.strip()
    if not raw:
        return None
    try:
        value = parse_datetime(raw)
    except ValueError:
        return None
    if value is None:
        return None
    value = datetime_in_range(value, what=what)  # 9999-12-31 overflows the ORM's conversion
    # datetime-local inputs carry no zone: the filter form labels them UTC.
    return timezone.make_aware(value, UTC) if timezone.is_naive(value) else value


@dataclass(frozen=True)
class Cursor:
    """A keyset position in the ledger's (created_at desc, id desc) order."""

    created_at: datetime
    id: str

    def encode(self) -> str:
        raw = json.dumps([self.created_at.isoformat(), self.id]).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> Cursor | None:
        if not token:
            return None
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            created, ident = json.loads(raw)
            when = parse_datetime(created)
        except (ValueError, TypeError, binascii.Error, json.JSONDecodeError):
            return None
        if when is None or not isinstance(ident, str):
            return None
        return cls(when, ident)

    @classmethod
    def of(cls, row: Instance) -> Cursor:
        return cls(row.created_at, row.id)


@dataclass(frozen=True)
class InstancePage:
    rows: list[Instance]
    next_cursor: Cursor | None  # older rows
    prev_cursor: Cursor | None  # newer rows (None on the first page)
    newest: Cursor | None  # the first row shown: "N new" counts rows above it


def _filtered(user: Any, filters: InstanceFilters, *, now: datetime) -> QuerySet[Instance]:
    return filter_given(access.scope(Instance.objects.all(), user), [
        ("tenant", filters.tenant),
        ("workflow", filters.workflow),
        ("status__in", filters.statuses),
        ("created_at__gte", now - RANGES[filters.range] if filters.range else None),
        ("created_at__gte", filters.since),
        ("created_at__lt", filters.until),
        ("id__startswith", filters.id_prefix),
        # engine_instance_search: the params' text, kept by triggers, trigram-indexed (PostgreSQL)
        ("search__text__icontains", filters.text),
    ])


def _older(c: Cursor) -> Q:
    return Q(created_at__lt=c.created_at) | Q(created_at=c.created_at, id__lt=c.id)


def _newer(c: Cursor) -> Q:
    return Q(created_at__gt=c.created_at) | Q(created_at=c.created_at, id__gt=c.id)


def instance_list(
    *, user: Any, filters: InstanceFilters, after: Cursor | None = None,
    before: Cursor | None = None, limit: int = PAGE_SIZE, now: datetime | None = None,
) -> InstancePage:
    """One page of the ledger, newest first, by keyset on (created_at, id): no OFFSET, so page
    1,000 costs what page 1 costs. `after` pages towards older rows, `before` towards newer."""
    now = now or timezone.now()
    qs = _filtered(user, filters, now=now).defer("output", "error_message")
    if before is not None:
        rows = list(qs.filter(_newer(before)).order_by("created_at", "id")[: limit + 1])
        has_newer = len(rows) > limit
        rows = list(reversed(rows[:limit]))
        if not rows:
            return instance_list(user=user, filters=filters, limit=limit, now=now)
        return InstancePage(rows, Cursor.of(rows[-1]), Cursor.of(rows[0]) if has_newer else None,
                            Cursor.of(rows[0]))
    if after is not None:
        qs = qs.filter(_older(after))
    rows = list(qs.order_by("-created_at", "-id")[: limit + 1])
    has_older = len(rows) > limit
    rows = rows[:limit]
    return InstancePage(
        rows=rows,
        next_cursor=Cursor.of(rows[-1]) if has_older and rows else None,
        prev_cursor=Cursor.of(rows[0]) if after is not None and rows else None,
        newest=Cursor.of(rows[0]) if rows else None,
    )


def instance_count_newer(*, user: Any, filters: InstanceFilters, than: Cursor | None, cap: int = 100) -> int:
    """How many rows matching the filters arrived above `than` (capped: the banner says 99+)."""
    qs = _filtered(user, filters, now=timezone.now())
    if than is not None:
        qs = qs.filter(_newer(than))
    return len(qs.order_by().values_list("id", flat=True)[:cap])


def instance_rows(*, user: Any, ids: list[str]) -> list[Instance]:
    """Current state of the given rows (the live feed refreshes the visible rows in place)."""
    return list(access.scope(Instance.objects.filter(id__in=ids), user).defer("output"))


def workflow_names(*, user: Any) -> list[str]:
    """Registered workflow names, for the filter's suggestions (the field accepts any name)."""
    return workflow_names_registered()
