"""The runs list's pages: keyset pages over (created_at, id) newest first, numbered pages for
every other sort, the capped count, the "N new" count, and the rows the live feed refreshes.
What matches the filters is instance_matches.py's; the filters themselves instance_filters.py's.
Every read is scoped to the requesting user's tenants."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import DurationField, ExpressionWrapper, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from dashboard import access
from dashboard.models import InstanceCost
from dashboard.selectors.instance_filters import (
    MAX_PAGE,
    SORTS,
    Cursor,
    InstanceFilters,
    attr_sort_key,
)
from dashboard.selectors.instance_matches import instance_matches
from ingest.engine import ByVendor
from ingest.engine import workflow_names as workflow_names_registered
from ingest.engine.models import Instance, InstanceAttributes

PAGE_SIZE = 50
COUNT_CAP = 10_000  # an exact count past this costs more than it tells: "10000+"


@dataclass(frozen=True)
class InstancePage:
    rows: list[Instance]
    next_cursor: Cursor | None  # older rows
    prev_cursor: Cursor | None  # newer rows (None on the first page)
    newest: Cursor | None  # the first row shown: "N new" counts rows above it
    page_number: int = 1  # orders other than newest first page by number
    has_more: bool = False


def instance_count(
    *, user: Any, filters: InstanceFilters, cap: int = COUNT_CAP, now: datetime | None = None
) -> tuple[int, bool]:
    """(how many instances match, up to `cap`; whether more than `cap` do). One statement: a
    count over the capped subquery, so a million-row ledger stops counting at the cap."""
    if filters.problems:
        return 0, False
    qs, id_field = instance_matches(user, filters, now=now or timezone.now())
    sql, params = qs.order_by().values(id_field)[: cap + 1].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM ({sql}) capped", params)  # noqa: S608 - compiled by the ORM
        row = cursor.fetchone()
    n = int(row[0]) if row else 0
    return min(n, cap), n > cap


def _older(c: Cursor, id_field: str = "id") -> Q:
    return Q(created_at__lt=c.created_at) | Q(created_at=c.created_at, **{f"{id_field}__lt": c.id})


def _newer(c: Cursor, id_field: str = "id") -> Q:
    return Q(created_at__gt=c.created_at) | Q(created_at=c.created_at, **{f"{id_field}__gt": c.id})


def _sort_value(qs: QuerySet[Any], sort: str, id_field: str = "id") -> tuple[QuerySet[Any], bool]:
    """`qs` annotated with the sort's value as `sort_value`, and whether that value can be NULL.
    `qs` holds instances (`id_field` "id") or attribute rows ("instance_id"), which keep the
    columns the sorts other than updated read."""
    key = sort.lstrip("-")
    attr = attr_sort_key(sort)
    if attr:
        attributes = "attributes" if id_field == "instance_id" else "attrs__attributes"
        return qs.annotate(sort_value=KeyTextTransform(attr, attributes)), True
    if key == "duration":
        return qs.annotate(
            sort_value=ExpressionWrapper(Coalesce(F("ended_at"), Now()) - F("started_at"), output_field=DurationField())
        ), True
    if key == "cost":
        spend = InstanceCost.objects.filter(instance_id=OuterRef(id_field)).values("total")[:1]
        return qs.annotate(sort_value=Subquery(spend)), True
    return qs.annotate(sort_value=F(SORTS[key])), key == "started"


def instance_order(qs: QuerySet[Any], sort: str, id_field: str = "id") -> QuerySet[Any]:
    qs, nullable = _sort_value(qs, sort, id_field)
    expr = F("sort_value")
    desc = sort.startswith("-")
    # created_at and updated_at are never NULL: no NULLS LAST, so the order is the one their
    # indexes (instance_recent, instance_updated) give and a LIMIT stops early on them.
    if nullable:
        first = expr.desc(nulls_last=True) if desc else expr.asc(nulls_last=True)
    else:
        first = expr.desc() if desc else expr.asc()
    return qs.order_by(first, "-created_at", f"-{id_field}")


def instance_list(
    *,
    user: Any,
    filters: InstanceFilters,
    after: Cursor | None = None,
    before: Cursor | None = None,
    limit: int = PAGE_SIZE,
    now: datetime | None = None,
    page: int = 1,
) -> InstancePage:
    """One page of the ledger. Newest first by keyset on (created_at, id): no OFFSET, so page
    1,000 costs what page 1 costs; `after` pages towards older rows, `before` towards newer.
    Any other `filters.sort` pages by number (`page`, at most MAX_PAGE)."""
    now = now or timezone.now()
    matches, id_field = instance_matches(user, filters, now=now)
    fetch: Callable[[QuerySet[Any]], list[Instance]]
    if id_field == "instance_id":
        # Attribute rows (an attribute filter): they give the page's ids in order, then only the
        # page's instances are read (never more than limit + 1).
        def fetch(qs: QuerySet[Any]) -> list[Instance]:
            return _instances_in_order(user, [str(i) for i in qs.values_list("instance_id", flat=True)])
    else:
        matches = matches.defer("output", "error_message")

        def fetch(qs: QuerySet[Any]) -> list[Instance]:
            return list(qs)

    if not filters.keyset:
        page = max(1, min(page, MAX_PAGE))
        rows = fetch(instance_order(matches, filters.sort, id_field)[(page - 1) * limit : page * limit + 1])
        return InstancePage(
            rows=rows[:limit],
            next_cursor=None,
            prev_cursor=None,
            newest=None,
            page_number=page,
            has_more=len(rows) > limit,
        )
    if before is not None:
        rows = fetch(matches.filter(_newer(before, id_field)).order_by("created_at", id_field)[: limit + 1])
        has_newer = len(rows) > limit
        rows = list(reversed(rows[:limit]))
        if not rows:
            return instance_list(user=user, filters=filters, limit=limit, now=now)
        return InstancePage(rows, Cursor.of(rows[-1]), Cursor.of(rows[0]) if has_newer else None, Cursor.of(rows[0]))
    if after is not None:
        matches = matches.filter(_older(after, id_field))
    rows = fetch(matches.order_by("-created_at", f"-{id_field}")[: limit + 1])
    has_older = len(rows) > limit
    rows = rows[:limit]
    return InstancePage(
        rows=rows,
        next_cursor=Cursor.of(rows[-1]) if has_older and rows else None,
        prev_cursor=Cursor.of(rows[0]) if after is not None and rows else None,
        newest=Cursor.of(rows[0]) if rows else None,
        has_more=has_older,
    )


def _instances_in_order(user: Any, ids: list[str]) -> list[Instance]:
    """The instances of `ids` (of the user's tenants), in the order of `ids`."""
    by_id = {r.id: r for r in access.scope(Instance.objects.filter(id__in=ids), user).defer("output", "error_message")}
    return [by_id[i] for i in ids if i in by_id]


@dataclass(frozen=True)
class CountedPage:
    page: InstancePage
    count: int  # exact up to the cap
    count_more: bool  # more than `count` match


def instance_list_counted(
    *,
    user: Any,
    filters: InstanceFilters,
    after: Cursor | None = None,
    before: Cursor | None = None,
    limit: int = PAGE_SIZE,
    page: int = 1,
    cap: int = COUNT_CAP,
    now: datetime | None = None,
) -> CountedPage:
    """A page of the ledger and how many instances match (exact up to `cap`), as
    `instance_list` and `instance_count` give them, in fewer passes over the matches.

    The capped count reads at most `cap + 1` matches; when that is all of them (the usual case
    for a search attribute or a rare status), the first or numbered page is sorted out of those
    same rows, so the matches are read once instead of once for the count and again for the
    page. When more than `cap` match, the page is read as `instance_list` reads it (a LIMIT over
    the sort's index)."""
    now = now or timezone.now()
    if filters.problems:
        return CountedPage(instance_list(user=user, filters=filters, limit=limit, now=now), 0, False)
    if after is None and before is None:
        page = 1 if filters.keyset else max(1, min(page, MAX_PAGE))
        ids, total = _page_ids_of_capped(user, filters, offset=(page - 1) * limit, limit=limit + 1, cap=cap, now=now)
        if total <= cap:
            return CountedPage(_page_of(user, filters, ids, limit=limit, page=page), total, False)
        # More than cap match: the count is known, the page is read on its own.
        return CountedPage(instance_list(user=user, filters=filters, limit=limit, now=now, page=page), cap, True)
    count, more = instance_count(user=user, filters=filters, cap=cap, now=now)
    rows = instance_list(user=user, filters=filters, after=after, before=before, limit=limit, now=now, page=page)
    return CountedPage(rows, count, more)


# The CTEs' materialization hint, on PostgreSQL; SQLite's statement goes without.
_MATERIALIZED = ByVendor[str](postgresql="MATERIALIZED ", sqlite="")


def _page_ids_of_capped(
    user: Any, filters: InstanceFilters, *, offset: int, limit: int, cap: int, now: datetime
) -> tuple[list[str], int]:
    """(the ids of the page, in the list's order; how many match, up to cap + 1) out of one read of
    at most `cap + 1` matches. With more than `cap`, some matches were not read: no ids then."""
    sort = filters.sort if not filters.keyset else "created"  # the keyset's value is created_at
    matches, id_field = instance_matches(user, filters, now=now)
    qs, nullable = _sort_value(matches.order_by(), sort, id_field)
    columns = (id_field, "created_at", "sort_value")  # sort_value: annotated by _sort_value
    sql, params = qs.values(*columns)[: cap + 1].query.sql_with_params()
    if filters.keyset:
        order = "m.created_at DESC, m.id DESC"
    else:
        direction = "DESC" if filters.sort.startswith("-") else "ASC"
        order = f"m.sort_value {direction}{' NULLS LAST' if nullable else ''}, m.created_at DESC, m.id DESC"
    hint = _MATERIALIZED()
    with connection.cursor() as cursor:
        # c counts m (the capped matches); the page is sorted out of m only when c says m holds
        # every match, so a broad filter pays for its count and not for sorting 10,001 rows it
        # will not use. rn keeps the page's order through the join.
        cursor.execute(
            f"WITH m (id, created_at, sort_value) AS {hint}({sql}), "  # noqa: S608 - compiled by the ORM
            f"c (n) AS {hint}(SELECT count(*) FROM m) "
            "SELECT c.n, p.id, p.rn FROM c LEFT JOIN ("
            f"SELECT m.id, row_number() OVER (ORDER BY {order}) AS rn FROM m "
            f"WHERE (SELECT n FROM c) <= %s ORDER BY {order} LIMIT %s OFFSET %s) p ON 1 = 1",
            [*params, cap, limit, offset],
        )
        got = cursor.fetchall()
    page = sorted((int(r[2]), str(r[1])) for r in got if r[1] is not None)
    return [i for _, i in page], int(got[0][0])


def _page_of(user: Any, filters: InstanceFilters, ids: list[str], *, limit: int, page: int) -> InstancePage:
    rows = _instances_in_order(user, ids)
    more = len(rows) > limit
    rows = rows[:limit]
    if not filters.keyset:
        return InstancePage(rows=rows, next_cursor=None, prev_cursor=None, newest=None, page_number=page, has_more=more)
    return InstancePage(
        rows=rows,
        next_cursor=Cursor.of(rows[-1]) if more and rows else None,
        prev_cursor=None,
        newest=Cursor.of(rows[0]) if rows else None,
        has_more=more,
    )


def instance_attributes(*, ids: list[str]) -> dict[str, dict[str, str]]:
    """The search attributes of the given instances (the rows shown), by id."""
    return dict(InstanceAttributes.objects.filter(instance_id__in=ids).values_list("instance_id", "attributes"))


def instance_count_newer(*, user: Any, filters: InstanceFilters, than: Cursor | None, cap: int = 100) -> int:
    """How many rows matching the filters arrived above `than` (capped: the banner says 99+)."""
    qs, id_field = instance_matches(user, filters, now=timezone.now())
    if than is not None:
        qs = qs.filter(_newer(than, id_field))
    return len(qs.order_by().values_list(id_field, flat=True)[:cap])


def instance_rows(*, user: Any, ids: list[str]) -> list[Instance]:
    """Current state of the given rows (the live feed refreshes the visible rows in place)."""
    return list(access.scope(Instance.objects.filter(id__in=ids), user).defer("output"))


def workflow_names(*, user: Any) -> list[str]:
    """Registered workflow names, for the filter's suggestions (the field accepts any name)."""
    return workflow_names_registered()
