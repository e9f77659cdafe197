"""The instances ledger: filters from the URL, keyset pages over (created_at, id), the
"N new" count. Every read is scoped to the requesting user's tenants."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import urlencode

from django.db import connection
from django.db.models import (
    DurationField,
    Exists,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce, Now
from django.http import QueryDict
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from dashboard import access
from dashboard.models import InstanceCost
from dashboard.selectors.common import M, filter_given
from ingest.engine import workflow_names as workflow_names_registered
from ingest.engine.models import (
    Instance,
    InstanceAttributes,
    InstanceAttributeValue,
    InstanceSearch,
    Status,
    Step,
)
from ingest.triggers.limits import datetime_in_range

PAGE_SIZE = 50
MAX_PAGE = 200  # numbered pages (orders other than newest first) stop here: narrow the filters
RANGES = {"15m": timedelta(minutes=15), "1h": timedelta(hours=1), "24h": timedelta(hours=24),
          "7d": timedelta(days=7), "30d": timedelta(days=30)}


# ---- the instances ledger ----------------------------------------------------------------


SORTS = {"created": "created_at", "started": "started_at", "updated": "updated_at", "duration": "duration",
         "cost": "cost"}
SORT_LABELS = {"-created": "newest first", "created": "oldest first", "-started": "started, latest first",
               "started": "started, earliest first", "-updated": "updated, latest first",
               "updated": "updated, earliest first", "-duration": "longest first", "duration": "shortest first",
               "-cost": "costliest first", "cost": "cheapest first"}
DEFAULT_SORT = "-created"
COUNT_CAP = 10_000  # an exact count past this costs more than it tells: "10000+"
ATTR_KEY = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
MAX_ATTRS = 5


@dataclass(frozen=True)
class InstanceFilters:
    """The list's filters, parsed from and written back to the URL query.

    `problems` names every value that did not parse (an unknown status, a bad attribute, an
    unknown sort): the page says so and shows nothing rather than a wider list, and a bulk action
    refuses to start from it."""

    workflow: str = ""
    statuses: tuple[str, ...] = ()
    tenant: str = ""
    range: str = ""
    since: datetime | None = None
    until: datetime | None = None
    id_prefix: str = ""
    text: str = ""
    step: str = ""
    attrs: tuple[tuple[str, str], ...] = ()
    sort: str = DEFAULT_SORT
    problems: tuple[str, ...] = ()

    @classmethod
    def from_query(cls, query: QueryDict) -> InstanceFilters:
        problems: list[str] = []
        statuses: list[str] = []
        for raw in query.getlist("status"):
            for value in (v.strip() for v in raw.split(",")):
                if value in Status.values:
                    statuses.append(value)
                elif value:
                    problems.append(f"status {value[:40]!r} is not a status (one of {', '.join(Status.values)})")
        rng = query.get("range", "")
        if rng and rng not in RANGES:
            problems.append(f"range {rng[:20]!r} is not one of {', '.join(RANGES)}")
        sort = query.get("sort", "").strip() or DEFAULT_SORT
        if sort.lstrip("-") not in SORTS and not _attr_sort_key(sort):
            problems.append(f"sort {sort[:40]!r} is not one of {', '.join(SORT_LABELS)} or attr.<key>")
            sort = DEFAULT_SORT
        attrs = _parse_attrs(query.getlist("attr"), problems)
        return cls(
            workflow=query.get("workflow", "").strip()[:200],
            statuses=tuple(dict.fromkeys(statuses)),
            tenant=query.get("tenant", "").strip()[:100],
            range=rng if rng in RANGES else "",
            since=_parse_time(query.get("since", ""), what="since"),
            until=_parse_time(query.get("until", ""), what="until"),
            id_prefix=query.get("id", "").strip()[:100],
            text=query.get("q", "").strip()[:200],
            step=query.get("step", "").strip()[:256],
            attrs=attrs,
            sort=sort,
            problems=tuple(problems),
        )

    def as_params(self, *, sort: bool = True) -> list[tuple[str, str]]:
        pairs: list[tuple[str, str]] = []
        if self.workflow:
            pairs.append(("workflow", self.workflow))
        pairs += [("status", s) for s in self.statuses]
        for key, value in (("tenant", self.tenant), ("range", self.range), ("id", self.id_prefix), ("q", self.text),
                           ("step", self.step)):
            if value:
                pairs.append((key, value))
        if self.since:
            pairs.append(("since", self.since.strftime("%Y-%m-%dT%H:%M")))
        if self.until:
            pairs.append(("until", self.until.strftime("%Y-%m-%dT%H:%M")))
        pairs += [("attr", f"{k}:{v}") for k, v in self.attrs]
        if sort and self.sort != DEFAULT_SORT:
            pairs.append(("sort", self.sort))
        return pairs

    def querystring(self) -> str:
        return urlencode(self.as_params())

    @property
    def active(self) -> bool:
        return bool(self.as_params(sort=False))

    @property
    def keyset(self) -> bool:
        """The default order pages by keyset; every other order by page number."""
        return self.sort == DEFAULT_SORT

    @property
    def attr_text(self) -> str:
        return " ".join(f"{k}:{v}" for k, v in self.attrs)


def _attr_sort_key(sort: str) -> str:
    key = sort.lstrip("-").removeprefix("attr.") if sort.lstrip("-").startswith("attr.") else ""
    return key if ATTR_KEY.match(key) else ""


def _parse_attrs(values: list[str], problems: list[str]) -> tuple[tuple[str, str], ...]:
    """`attr=customer:acme` (repeatable, or several separated by spaces in one field)."""
    out: list[tuple[str, str]] = []
    for raw in values:
        for piece in raw.split():
            key, sep, value = piece.partition(":")
            if not sep or not ATTR_KEY.match(key) or not value or len(value) > 200:
                problems.append(f"attribute filter {piece[:60]!r} is not key:value (e.g. customer:acme; keys are "
                                "lower-case letters, digits and _)")
                continue
            out.append((key, value))
    if len(out) > MAX_ATTRS:
        problems.append(f"{len(out)} attribute filters; at most {MAX_ATTRS}")
        return ()
    return tuple(out)


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
    page_number: int = 1  # orders other than newest first page by number
    has_more: bool = False


def instance_filtered(*, user: Any, filters: InstanceFilters, now: datetime | None = None) -> QuerySet[Instance]:
    """Every instance of the user's tenants the filters match (unordered). A filter with problems
    matches nothing: a value that did not parse never widens the list."""
    if filters.problems:
        return Instance.objects.none()
    now = now or timezone.now()
    qs = filter_given(access.scope(Instance.objects.all(), user), [
        ("tenant", filters.tenant),
        ("status__in", filters.statuses),
        ("created_at__gte", now - RANGES[filters.range] if filters.range else None),
        ("created_at__gte", filters.since),
        ("created_at__lt", filters.until),
        ("id__startswith", filters.id_prefix),
        # engine_instance_search: the params' text, kept by triggers, trigram-indexed (PostgreSQL)
        ("search__text__icontains", filters.text),
    ])
    if filters.workflow:
        # A known name is matched exactly (its index); anything else is a part of a name.
        known = filters.workflow in workflow_names_registered()
        qs = qs.filter(workflow=filters.workflow) if known else qs.filter(workflow__icontains=filters.workflow)
    if filters.step:
        qs = qs.filter(Exists(Step.objects.filter(instance_id=OuterRef("id"), name=filters.step)))
    return attributes_filter(qs, filters.attrs)


def attributes_filter(qs: QuerySet[M], attrs: tuple[tuple[str, str], ...], *,
                      field: str = "attrs__attributes") -> QuerySet[M]:
    """Instances (or attribute rows, with `field="attributes"`) whose search attributes hold
    every (key, value). Instances: an EXISTS per pair over engine_instance_attribute_values,
    which its covering btree answers from one (key, value)'s entries (a semi-join the planner
    hashes or probes by primary key), not the GIN index's recheck of one scattered attribute row
    per match."""
    if not attrs:
        return qs
    if field == "attrs__attributes":
        for key, value in attrs:
            qs = qs.filter(Exists(InstanceAttributeValue.objects.filter(instance_id=OuterRef("id"), key=key,
                                                                        value=value)))
        return qs
    if connection.vendor == "postgresql":  # one @> through the GIN index (migration 0010)
        return qs.filter(**{f"{field}__contains": dict(attrs)})
    for key, value in attrs:
        qs = qs.filter(**{f"{field}__{key}": value})
    return qs


def attribute_rows_filtered(*, user: Any, filters: InstanceFilters,
                            now: datetime | None = None) -> QuerySet[InstanceAttributes] | None:
    """The attribute rows of the instances `instance_filtered` matches, read from
    engine_instance_attributes alone: it keeps a copy of the instance's tenant, workflow, status
    and times (migration 0019), so a list with an attribute filter reads no instance row for its
    filter, count or sort. None when there is no attribute filter (every instance without
    attributes could match) or the sort needs a column the copy does not keep (updated_at, which
    every claim and heartbeat changes)."""
    if not filters.attrs or filters.problems or filters.sort.lstrip("-") == "updated":
        return None
    qs = _copy_filtered(InstanceAttributes.objects.all(), user=user, filters=filters, now=now or timezone.now())
    return attributes_filter(qs, filters.attrs, field="attributes")


def attribute_values_filtered(*, user: Any, filters: InstanceFilters,
                              now: datetime | None = None) -> QuerySet[InstanceAttributeValue] | None:
    """The same matches as `attribute_rows_filtered`, as rows of engine_instance_attribute_values
    (one per instance and key, migration 0020): the first attribute filter is a range of the
    covering btree (key, value, tenant, status), which also carries the workflow and the times, so
    the filter, the count and every sort but an attribute's read that index alone, one (key,
    value)'s entries side by side instead of one scattered table page per match. Each further
    attribute filter is a primary-key probe per match. None where `attribute_rows_filtered`
    answers and this does not: no attribute filter, sort by updated, or sort by an attribute (the
    JSON object holds the other keys)."""
    if not filters.attrs or filters.problems or filters.sort.lstrip("-") == "updated" \
            or _attr_sort_key(filters.sort):
        return None
    (key, value), *more = filters.attrs
    qs = _copy_filtered(InstanceAttributeValue.objects.filter(key=key, value=value), user=user, filters=filters,
                        now=now or timezone.now())
    for key, value in more:
        qs = qs.filter(Exists(InstanceAttributeValue.objects.filter(instance_id=OuterRef("instance_id"), key=key,
                                                                    value=value)))
    return qs


C = TypeVar("C", InstanceAttributes, InstanceAttributeValue)


def _copy_filtered(qs: QuerySet[C], *, user: Any, filters: InstanceFilters, now: datetime) -> QuerySet[C]:
    """`qs` (rows that keep the instance's list columns, keyed by `instance_id`) narrowed to the
    user's tenants and every filter but the attributes."""
    qs = filter_given(access.scope(qs, user), [
        ("tenant", filters.tenant),
        ("status__in", filters.statuses),
        ("created_at__gte", now - RANGES[filters.range] if filters.range else None),
        ("created_at__gte", filters.since),
        ("created_at__lt", filters.until),
        # InstanceAttributes.instance is a one-to-one key: instance__id is its local column, no join.
        ("instance__id__startswith" if qs.model is InstanceAttributes else "instance_id__startswith",
         filters.id_prefix),
    ])
    if filters.text:
        qs = qs.filter(Exists(InstanceSearch.objects.filter(instance_id=OuterRef("instance_id"),
                                                            text__icontains=filters.text)))
    if filters.workflow:
        known = filters.workflow in workflow_names_registered()
        qs = qs.filter(workflow=filters.workflow) if known else qs.filter(workflow__icontains=filters.workflow)
    if filters.step:
        qs = qs.filter(Exists(Step.objects.filter(instance_id=OuterRef("instance_id"), name=filters.step)))
    return qs


def _matches(user: Any, filters: InstanceFilters, *, now: datetime) -> tuple[QuerySet[Any], str]:
    """(the matches, the name of their instance id column): an attribute's value rows or the
    attribute rows when they can answer the filters alone, else the instances."""
    rows: QuerySet[Any] | None = attribute_values_filtered(user=user, filters=filters, now=now)
    if rows is None:
        rows = attribute_rows_filtered(user=user, filters=filters, now=now)
    if rows is not None:
        return rows, "instance_id"
    return instance_filtered(user=user, filters=filters, now=now), "id"


def attributes_parse(values: list[str]) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """(the `key:value` filters, the problems of those that do not parse)."""
    problems: list[str] = []
    return _parse_attrs(values, problems), problems


def sort_valid(sort: str) -> bool:
    return sort.lstrip("-") in SORTS or bool(_attr_sort_key(sort))


def instance_count(*, user: Any, filters: InstanceFilters, cap: int = COUNT_CAP,
                   now: datetime | None = None) -> tuple[int, bool]:
    """(how many instances match, up to `cap`; whether more than `cap` do). One statement: a
    count over the capped subquery, so a million-row ledger stops counting at the cap."""
    if filters.problems:
        return 0, False
    qs, id_field = _matches(user, filters, now=now or timezone.now())
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
    attr = _attr_sort_key(sort)
    if attr:
        attributes = "attributes" if id_field == "instance_id" else "attrs__attributes"
        return qs.annotate(sort_value=KeyTextTransform(attr, attributes)), True
    if key == "duration":
        return qs.annotate(sort_value=ExpressionWrapper(Coalesce(F("ended_at"), Now()) - F("started_at"),
                                                        output_field=DurationField())), True
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
    *, user: Any, filters: InstanceFilters, after: Cursor | None = None,
    before: Cursor | None = None, limit: int = PAGE_SIZE, now: datetime | None = None, page: int = 1,
) -> InstancePage:
    """One page of the ledger. Newest first by keyset on (created_at, id): no OFFSET, so page
    1,000 costs what page 1 costs; `after` pages towards older rows, `before` towards newer.
    Any other `filters.sort` pages by number (`page`, at most MAX_PAGE)."""
    now = now or timezone.now()
    matches, id_field = _matches(user, filters, now=now)
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
        rows = fetch(instance_order(matches, filters.sort, id_field)[(page - 1) * limit: page * limit + 1])
        return InstancePage(rows=rows[:limit], next_cursor=None, prev_cursor=None, newest=None,
                            page_number=page, has_more=len(rows) > limit)
    if before is not None:
        rows = fetch(matches.filter(_newer(before, id_field)).order_by("created_at", id_field)[: limit + 1])
        has_newer = len(rows) > limit
        rows = list(reversed(rows[:limit]))
        if not rows:
            return instance_list(user=user, filters=filters, limit=limit, now=now)
        return InstancePage(rows, Cursor.of(rows[-1]), Cursor.of(rows[0]) if has_newer else None,
                            Cursor.of(rows[0]))
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
    *, user: Any, filters: InstanceFilters, after: Cursor | None = None, before: Cursor | None = None,
    limit: int = PAGE_SIZE, page: int = 1, cap: int = COUNT_CAP, now: datetime | None = None,
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


def _page_ids_of_capped(user: Any, filters: InstanceFilters, *, offset: int, limit: int, cap: int,
                        now: datetime) -> tuple[list[str], int]:
    """(the ids of the page, in the list's order; how many match, up to cap + 1) out of one read of
    at most `cap + 1` matches. With more than `cap`, some matches were not read: no ids then."""
    sort = filters.sort if not filters.keyset else "created"  # the keyset's value is created_at
    matches, id_field = _matches(user, filters, now=now)
    qs, nullable = _sort_value(matches.order_by(), sort, id_field)
    columns = (id_field, "created_at", "sort_value")  # sort_value: annotated by _sort_value
    sql, params = qs.values(*columns)[: cap + 1].query.sql_with_params()
    if filters.keyset:
        order = "m.created_at DESC, m.id DESC"
    else:
        direction = "DESC" if filters.sort.startswith("-") else "ASC"
        order = f"m.sort_value {direction}{' NULLS LAST' if nullable else ''}, m.created_at DESC, m.id DESC"
    hint = "MATERIALIZED " if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        # c counts m (the capped matches); the page is sorted out of m only when c says m holds
        # every match, so a broad filter pays for its count and not for sorting 10,001 rows it
        # will not use. rn keeps the page's order through the join.
        cursor.execute(f"WITH m (id, created_at, sort_value) AS {hint}({sql}), "  # noqa: S608 - compiled by the ORM
                       f"c (n) AS {hint}(SELECT count(*) FROM m) "
                       "SELECT c.n, p.id, p.rn FROM c LEFT JOIN ("
                       f"SELECT m.id, row_number() OVER (ORDER BY {order}) AS rn FROM m "
                       f"WHERE (SELECT n FROM c) <= %s ORDER BY {order} LIMIT %s OFFSET %s) p ON 1 = 1",
                       [*params, cap, limit, offset])
        got = cursor.fetchall()
    page = sorted((int(r[2]), str(r[1])) for r in got if r[1] is not None)
    return [i for _, i in page], int(got[0][0])


def _page_of(user: Any, filters: InstanceFilters, ids: list[str], *, limit: int, page: int) -> InstancePage:
    rows = _instances_in_order(user, ids)
    more = len(rows) > limit
    rows = rows[:limit]
    if not filters.keyset:
        return InstancePage(rows=rows, next_cursor=None, prev_cursor=None, newest=None, page_number=page,
                            has_more=more)
    return InstancePage(rows=rows, next_cursor=Cursor.of(rows[-1]) if more and rows else None, prev_cursor=None,
                        newest=Cursor.of(rows[0]) if rows else None, has_more=more)


def instance_attributes(*, ids: list[str]) -> dict[str, dict[str, str]]:
    """The search attributes of the given instances (the rows shown), by id."""
    return dict(InstanceAttributes.objects.filter(instance_id__in=ids).values_list("instance_id", "attributes"))


def instance_count_newer(*, user: Any, filters: InstanceFilters, than: Cursor | None, cap: int = 100) -> int:
    """How many rows matching the filters arrived above `than` (capped: the banner says 99+)."""
    qs, id_field = _matches(user, filters, now=timezone.now())
    if than is not None:
        qs = qs.filter(_newer(than, id_field))
    return len(qs.order_by().values_list(id_field, flat=True)[:cap])


def instance_rows(*, user: Any, ids: list[str]) -> list[Instance]:
    """Current state of the given rows (the live feed refreshes the visible rows in place)."""
    return list(access.scope(Instance.objects.filter(id__in=ids), user).defer("output"))


def workflow_names(*, user: Any) -> list[str]:
    """Registered workflow names, for the filter's suggestions (the field accepts any name)."""
    return workflow_names_registered()
