"""Which instances the runs list's filters match, scoped to the requesting user's tenants: the
instances themselves, or (with a search-attribute filter) the attribute rows that keep a copy of
the instance's list columns and answer the filters, the count and most sorts alone."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from dashboard import access
from dashboard.selectors.common import M, filter_given
from dashboard.selectors.instance_filters import RANGES, InstanceFilters, attr_sort_key
from ingest.engine import workflow_names as workflow_names_registered
from ingest.engine.models import (
    Instance,
    InstanceAttributes,
    InstanceAttributeValue,
    InstanceSearch,
    Step,
)


def instance_filtered(
    *, user: Any, filters: InstanceFilters, now: datetime | None = None
) -> QuerySet[Instance]:
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
        ],
    )
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
        qs = (
            qs.filter(workflow=filters.workflow)
            if known
            else qs.filter(workflow__icontains=filters.workflow)
        )
    if filters.step:
        qs = qs.filter(
            Exists(Step.objects.filter(instance_id=OuterRef(id_column), name=filters.step))
        )
    return qs


def attributes_filter(
    qs: QuerySet[M], attrs: tuple[tuple[str, str], ...], *, field: str = "attrs__attributes"
) -> QuerySet[M]:
    """Instances (or attribute rows, with `field="attributes"`) whose search attributes hold
    every (key, value). Instances: an EXISTS per pair over engine_instance_attribute_values,
    which its covering btree answers from one (key, value)'s entries (a semi-join the planner
    hashes or probes by primary key), not the GIN index's recheck of one scattered attribute row
    per match."""
    if not attrs:
        return qs
    if field == "attrs__attributes":
        for key, value in attrs:
            qs = qs.filter(_has_value("id", key, value))
        return qs
    if connection.vendor == "postgresql":  # one @> through the GIN index (migration 0010)
        return qs.filter(**{f"{field}__contains": dict(attrs)})
    for key, value in attrs:
        qs = qs.filter(**{f"{field}__{key}": value})
    return qs


def attribute_rows_filtered(
    *, user: Any, filters: InstanceFilters, now: datetime | None = None
) -> QuerySet[InstanceAttributes] | None:
    """The attribute rows of the instances `instance_filtered` matches, read from
    engine_instance_attributes alone: it keeps a copy of the instance's tenant, workflow, status
    and times (migration 0019), so a list with an attribute filter reads no instance row for its
    filter, count or sort. None when there is no attribute filter (every instance without
    attributes could match) or the sort needs a column the copy does not keep (updated_at, which
    every claim and heartbeat changes)."""
    if not filters.attrs or filters.problems or filters.sort.lstrip("-") == "updated":
        return None
    qs = _copy_filtered(
        InstanceAttributes.objects.all(), user=user, filters=filters, now=now or timezone.now()
    )
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
    if (
        not filters.attrs
        or filters.problems
        or filters.sort.lstrip("-") == "updated"
        or attr_sort_key(filters.sort)
    ):
        return None
    (key, value), *more = filters.attrs
    qs = _copy_filtered(
        InstanceAttributeValue.objects.filter(key=key, value=value),
        user=user,
        filters=filters,
        now=now or timezone.now(),
    )
    for key, value in more:
        qs = qs.filter(_has_value("instance_id", key, value))
    return qs


def _has_value(outer: str, key: str, value: str) -> Exists:
    """The outer row's instance has `key` = `value` (one probe of the value rows' btree)."""
    return Exists(
        InstanceAttributeValue.objects.filter(instance_id=OuterRef(outer), key=key, value=value)
    )


C = TypeVar("C", InstanceAttributes, InstanceAttributeValue)


def _copy_filtered(
    qs: QuerySet[C], *, user: Any, filters: InstanceFilters, now: datetime
) -> QuerySet[C]:
    """`qs` (rows that keep the instance's list columns, keyed by `instance_id`) narrowed to the
    user's tenants and every filter but the attributes."""
    qs = filter_given(
        access.scope(qs, user),
        [
            *_tenant_status_time(filters, now),
            # InstanceAttributes.instance is a one-to-one key: instance__id is its local column, no join.
            (
                "instance__id__startswith"
                if qs.model is InstanceAttributes
                else "instance_id__startswith",
                filters.id_prefix,
            ),
        ],
    )
    if filters.text:
        qs = qs.filter(
            Exists(
                InstanceSearch.objects.filter(
                    instance_id=OuterRef("instance_id"), text__icontains=filters.text
                )
            )
        )
    return _workflow_and_step(qs, filters, id_column="instance_id")


def instance_matches(
    user: Any, filters: InstanceFilters, *, now: datetime
) -> tuple[QuerySet[Any], str]:
    """(the matches, the name of their instance id column): an attribute's value rows or the
    attribute rows when they can answer the filters alone, else the instances."""
    rows: QuerySet[Any] | None = attribute_values_filtered(user=user, filters=filters, now=now)
    if rows is None:
        rows = attribute_rows_filtered(user=user, filters=filters, now=now)
    if rows is not None:
        return rows, "instance_id"
    return instance_filtered(user=user, filters=filters, now=now), "id"
