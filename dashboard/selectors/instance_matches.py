"""Which instances the runs list's filters match, scoped to the requesting user's tenants: the
instances themselves, or (with a search-attribute filter) the attribute rows that keep a copy of
the instance's list columns and answer the filters, the count and most sorts alone."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, Protocol, TypeVar

from django.db import connection
from django.db.models import Case, Exists, FloatField, OuterRef, Q, QuerySet, When
from django.db.models.functions import Cast
from django.utils import timezone

from dashboard import access
from dashboard.attr_query import NUMBER_SQL, AttrTerm
from dashboard.selectors.common import M, filter_given
from dashboard.selectors.instance_filters import RANGES, InstanceFilters, attr_sort_key
from ingest.engine import ByVendor
from ingest.engine import workflow_names as workflow_names_registered
from ingest.engine.models import (
    FanOutItem,
    Instance,
    InstanceAttributes,
    InstanceAttributeValue,
    InstanceSearch,
    Step,
)


def instance_filtered(*, user: Any, filters: InstanceFilters, now: datetime | None = None) -> QuerySet[Instance]:
    """Every instance of the user's tenants the filters match (unordered). A filter with problems
    matches nothing: a value that did not parse never widens the list."""
    if filters.problems:
        return Instance.objects.none()
    now = now or timezone.now()
    qs = filter_given(
        access.scope(Instance.objects.all(), user),
        [
            *_tenant_status_time(filters, now),
            ("id__startswith", filters.id_prefix),
            # engine_instance_search: the params' text, kept by triggers, trigram-indexed (PostgreSQL)
            ("search__text__icontains", filters.text),
            ("parent_id", filters.parent),  # instance_parent: a partial, covering index of the rows with one
        ],
    )
    if filters.parent:
        qs = qs.filter(_item_or_child_of(filters.parent))
    elif filters.top_level and items_exist():
        qs = qs.filter(_top_level("id"))
    return attributes_filter(_workflow_and_step(qs, filters, id_column="id"), filters.attrs)


def _tenant_status_time(filters: InstanceFilters, now: datetime) -> list[tuple[str, Any]]:
    """The (lookup, value) pairs of the filters every row kind keeps a column for, as
    `filter_given` takes them."""
    return [
        ("tenant", filters.tenant),
        ("status__in", filters.statuses),
        ("created_at__gte", now - RANGES[filters.range] if filters.range else None),
        ("created_at__gte", filters.since),
        ("created_at__lt", filters.until),
    ]


def _workflow_and_step(qs: QuerySet[M], filters: InstanceFilters, *, id_column: str) -> QuerySet[M]:
    """`qs` narrowed to the filters' workflow and step; `id_column` is its instance id column."""
    if filters.workflow:
        # A known name is matched exactly (its index); anything else is a part of a name.
        known = filters.workflow in workflow_names_registered()
        qs = qs.filter(workflow=filters.workflow) if known else qs.filter(workflow__icontains=filters.workflow)
    if filters.step:
        qs = qs.filter(Exists(Step.objects.filter(instance_id=OuterRef(id_column), name=filters.step)))
    return qs


def attributes_filter(qs: QuerySet[M], attrs: tuple[AttrTerm, ...], *, field: str = "attrs__attributes") -> QuerySet[M]:
    """Instances (or attribute rows, with `field="attributes"`) whose search attributes match
    every term. Instances: an EXISTS (NOT EXISTS for a negated term) per term over
    engine_instance_attribute_values, which its covering btree answers from one key's entries (a
    semi-join the planner hashes or probes by primary key), not the GIN index's recheck of one
    scattered attribute row per match. Attribute rows: the plain `key:value` terms as one @>
    through the GIN index (PostgreSQL), the others as the same EXISTS."""
    if not attrs:
        return qs
    if field == "attrs__attributes":
        for term in attrs:
            qs = qs.filter(_has_term("id", term))
        return qs
    equalities = [t.equality for t in attrs if t.equality is not None]
    if equalities:
        qs = _equal_to()(qs, field, equalities)
    for term in attrs:
        if term.equality is None:
            qs = qs.filter(_has_term("instance_id", term))
    return qs


def _contains(qs: QuerySet[M], field: str, equalities: list[tuple[str, str]]) -> QuerySet[M]:
    """PostgreSQL: one @> through the GIN index (migration 0010)."""
    return qs.filter(**{f"{field}__contains": dict(equalities)})


def _key_by_key(qs: QuerySet[M], field: str, equalities: list[tuple[str, str]]) -> QuerySet[M]:
    """SQLite (no JSON containment): one key lookup per term."""
    for key, value in equalities:
        qs = qs.filter(**{f"{field}__{key}": value})
    return qs


class _EqualTo(Protocol):
    def __call__(self, qs: QuerySet[M], field: str, equalities: list[tuple[str, str]], /) -> QuerySet[M]: ...


_equal_to = ByVendor[_EqualTo](postgresql=_contains, sqlite=_key_by_key)


def _number() -> Case:
    """The value as a number, or NULL when it is not one: the CASE keeps the cast from ever seeing
    text that is not a number (PostgreSQL would raise, SQLite would read it as 0)."""
    return Case(
        When(value__regex=NUMBER_SQL, then=Cast("value", FloatField())), default=None, output_field=FloatField()
    )


def _term_rows(qs: QuerySet[InstanceAttributeValue], term: AttrTerm) -> QuerySet[InstanceAttributeValue]:
    """The value rows of `qs` that hold `term` (not negated): one key's entries of the btree."""
    qs = qs.filter(key=term.key)
    if term.values:
        return qs.filter(value=term.values[0]) if len(term.values) == 1 else qs.filter(value__in=term.values)
    qs = qs.alias(number=_number())
    bounds = Q(number__isnull=False)
    if term.low is not None:
        bounds &= Q(number__gt=term.low) if term.low_open else Q(number__gte=term.low)
    if term.high is not None:
        bounds &= Q(number__lt=term.high) if term.high_open else Q(number__lte=term.high)
    return qs.filter(bounds)


def _has_term(outer: str, term: AttrTerm) -> Q:
    """The outer row's instance matches `term`: one probe of the value rows' btree."""
    found = Exists(_term_rows(InstanceAttributeValue.objects.filter(instance_id=OuterRef(outer)), term))
    return ~Q(found) if term.negate else Q(found)


def _item_of_a_run(outer: str) -> tuple[Exists, Exists]:
    """Whether the outer row's instance is an item of a run's fan-out, and whether it is the child
    run of a run's step: what the list leaves out by default and shows under its parent. A probe
    of engine_fanoutitem's primary key and one of the partial index step_child, so the attribute
    copies, which keep no parent column, answer it without reading the instance. An instance whose
    parent's step is gone (a restart deletes the steps it redoes, and their fan-outs) is nobody's
    item any more: it is listed among the top-level runs, as its parent no longer counts it."""
    return (
        Exists(FanOutItem.objects.filter(instance_id=OuterRef(outer))),
        Exists(Step.objects.filter(child_id=OuterRef(outer))),
    )


def _item_or_child_of(parent: str) -> Q:
    """The instance is an item of one of `parent`'s fan-outs or the child run of one of its
    steps (`parent_id` alone also names the instances a restart of the parent orphaned, which the
    list shows among the top-level runs). Asked of that run's own fan-outs and steps, through
    their indexes: the EXISTS probes of `_item_of_a_run`, joined by OR, were planned as a hash of
    every fan-out item in the ledger (100,000 rows hashed for a run of 10,000; 2,753 buffers →
    227 with instance_parent covering the rest)."""
    items = FanOutItem.objects.filter(fan_out__instance_id=parent).values("instance_id")
    children = Step.objects.filter(instance_id=parent, child__isnull=False).values("child_id")
    carriers = Q(parent_id=parent, id__regex=CARRIER_ID)  # a packed fan-out's items run in these
    return Q(id__in=items) | Q(id__in=children) | carriers


CARRIER_ID = r"^_fo[0-9]+-[0-9]+-[0-9]+$"  # ingest/engine/runtime/fan_out_packs.py, carrier_id
_items_seen = False  # once any item existed, assume some still do (see items_exist)
_none_until = 0.0  # monotonic time until which "no item exists" is taken as still true
NONE_FOR = 2.0  # seconds


def items_exist() -> bool:
    """Whether any instance is a fan-out item or a child run. When none is (a ledger that never
    fanned out), "top-level only" leaves nothing out and is not asked of the database: the list's
    capped count reads its indexes alone (index-only scans), and the probes below need each row's
    id, which those indexes do not hold (3 ms → 40 ms for a day of 1 M instances). One statement
    over two small indexes, asked at most every NONE_FOR seconds while the answer is no (so the
    very first fan-out's items may show among the top-level runs for that long); once it said
    yes, this process stops asking (the probes are right whether or not items remain, only
    slower when none does)."""
    global _items_seen, _none_until
    if _items_seen:
        return True
    if time.monotonic() < _none_until:
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {FanOutItem._meta.db_table}) "  # noqa: S608 - table names
            f"OR EXISTS (SELECT 1 FROM {Step._meta.db_table} WHERE child_id IS NOT NULL)"
        )
        row = cursor.fetchone()
    _items_seen = bool(row and row[0])
    _none_until = time.monotonic() + NONE_FOR
    return _items_seen


def _top_level(outer: str, *, id_column: str = "") -> Q:
    """The outer row's instance is nobody's item (a packed fan-out's carrier, known by its id
    `_fo<fan-out>-<first>-<last>`, counts as its parent's items; `id_column` is the text column
    holding the outer id where `outer` is a key that takes no text lookup). Not `parent_id IS NULL`: the copies keep no
    parent column, and on the instances no index the list scans holds it. Two NOT EXISTS, not
    NOT (EXISTS OR EXISTS): PostgreSQL plans each as an anti-join and keeps its row estimate,
    where the OR becomes a filter run per row with a guessed selectivity that turned a scan of
    three statuses' index into a bitmap heap scan (30 ms → 270 ms over 1 M instances)."""
    item, child = _item_of_a_run(outer)
    return ~Q(item) & ~Q(child) & ~Q(**{f"{id_column or outer}__regex": CARRIER_ID})


def _positive(filters: InstanceFilters) -> AttrTerm | None:
    """The first term that only an instance with that attribute can match, or None (every term is
    negated: an instance without attributes matches, so the attribute tables cannot answer)."""
    return next((t for t in filters.attrs if not t.negate), None)


def attribute_rows_filtered(
    *, user: Any, filters: InstanceFilters, now: datetime | None = None
) -> QuerySet[InstanceAttributes] | None:
    """The attribute rows of the instances `instance_filtered` matches, read from
    engine_instance_attributes alone: it keeps a copy of the instance's tenant, workflow, status
    and times (migration 0019), so a list with an attribute filter reads no instance row for its
    filter, count or sort. None when no attribute term needs the attribute (none, or every one
    negated: an instance without attributes could match), when the list asks for one run's
    items (`parent`: its index narrows them first), or the sort needs a column the copy does not keep (updated_at, which
    every claim and heartbeat changes)."""
    if _positive(filters) is None or filters.problems or filters.parent or filters.sort.lstrip("-") == "updated":
        return None
    qs = _copy_filtered(InstanceAttributes.objects.all(), user=user, filters=filters, now=now or timezone.now())
    return attributes_filter(qs, filters.attrs, field="attributes")


def attribute_values_filtered(
    *, user: Any, filters: InstanceFilters, now: datetime | None = None
) -> QuerySet[InstanceAttributeValue] | None:
    """The same matches as `attribute_rows_filtered`, as rows of engine_instance_attribute_values
    (one per instance and key, migration 0020): the first attribute filter is a range of the
    covering btree (key, value, tenant, status), which also carries the workflow and the times, so
    the filter, the count and every sort but an attribute's read that index alone, one (key,
    value)'s entries side by side instead of one scattered table page per match. Each further
    attribute filter is a primary-key probe per match. None where `attribute_rows_filtered`
    answers and this does not: no attribute filter, sort by updated, or sort by an attribute (the
    JSON object holds the other keys)."""
    first = _positive(filters)
    if (
        first is None
        or filters.problems
        or filters.parent
        or filters.sort.lstrip("-") == "updated"
        or attr_sort_key(filters.sort)
    ):
        return None
    qs = _copy_filtered(
        _term_rows(InstanceAttributeValue.objects.all(), first),
        user=user,
        filters=filters,
        now=now or timezone.now(),
    )
    for term in filters.attrs:
        if term is not first:
            qs = qs.filter(_has_term("instance_id", term))
    return qs


C = TypeVar("C", InstanceAttributes, InstanceAttributeValue)


def _copy_filtered(qs: QuerySet[C], *, user: Any, filters: InstanceFilters, now: datetime) -> QuerySet[C]:
    """`qs` (rows that keep the instance's list columns, keyed by `instance_id`) narrowed to the
    user's tenants and every filter but the attributes."""
    qs = filter_given(
        access.scope(qs, user),
        [
            *_tenant_status_time(filters, now),
            # InstanceAttributes.instance is a one-to-one key: instance__id is its local column, no join.
            (
                "instance__id__startswith" if qs.model is InstanceAttributes else "instance_id__startswith",
                filters.id_prefix,
            ),
        ],
    )
    if filters.hides_items and items_exist():
        qs = qs.filter(
            _top_level("instance_id", id_column="instance__id" if qs.model is InstanceAttributes else "instance_id")
        )
    if filters.text:
        qs = qs.filter(
            Exists(InstanceSearch.objects.filter(instance_id=OuterRef("instance_id"), text__icontains=filters.text))
        )
    return _workflow_and_step(qs, filters, id_column="instance_id")


def instance_matches(user: Any, filters: InstanceFilters, *, now: datetime) -> tuple[QuerySet[Any], str]:
    """(the matches, the name of their instance id column): an attribute's value rows or the
    attribute rows when they can answer the filters alone, else the instances."""
    rows: QuerySet[Any] | None = attribute_values_filtered(user=user, filters=filters, now=now)
    if rows is None:
        rows = attribute_rows_filtered(user=user, filters=filters, now=now)
    if rows is not None:
        return rows, "instance_id"
    return instance_filtered(user=user, filters=filters, now=now), "id"
