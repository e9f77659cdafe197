"""Reads behind the REST API, scoped to the caller's tenants; plain dicts for the schemas."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.http import QueryDict

from dashboard.actions import failed_for_good
from dashboard.api.errors import ApiProblem
from dashboard.selectors.instance_filters import Cursor, InstanceFilters
from dashboard.selectors.instances import instance_attributes, instance_list
from dashboard.staleness import instance_version
from ingest.engine import REDACTED, progress_of, public_value, step_progress, stored_config_json
from ingest.engine.models import (
    ApiCost,
    Budget,
    BudgetScope,
    History,
    Instance,
    Step,
    StepKind,
)
from ingest.engine.models import Status as InstanceStatus

MAX_LIMIT = 200


def as_utc(value: datetime | None, *, what: str = "time") -> datetime | None:
    """Aware UTC (naive means UTC). PostgreSQL refuses offsets beyond ±15:59, so none reach it.
    A time whose offset takes it past the calendar's first or last day (0001-01-01T00:00+01:00)
    is that day's edge: every valid RFC 3339 time is a valid filter."""
    if value is None:
        return None
    try:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except (OverflowError, ValueError):
        edge = datetime.min if value.year == datetime.min.year else datetime.max
        return edge.replace(tzinfo=UTC)


def _given(qs: QuerySet[Any], **lookups: object) -> QuerySet[Any]:
    """Filter on the lookups whose value was given (None or empty means no filter)."""
    return qs.filter(**{k: v for k, v in lookups.items() if v})


def _error(name: str, message: str) -> dict[str, str] | None:
    return {"name": name, "message": message} if name or message else None


def instance_dict(i: Instance) -> dict[str, Any]:
    return {
        "id": i.id,
        "workflow": i.workflow,
        "tenant": i.tenant,
        "status": i.status,
        # A workflow's sensitive params are stored sealed and answered as "redacted".
        "params": public_value(i.params) if isinstance(i.params, dict) else {},
        "output": public_value(i.output),
        "error": _error(i.error_name, i.error_message),
        "priority": i.priority,
        "created_at": i.created_at,
        "updated_at": i.updated_at,
        "started_at": i.started_at,
        "ended_at": i.ended_at,
        "parent_id": i.parent_id,
        "replay_of_id": i.replay_of_id,
        "workflow_version": i.workflow_version,
        "fork_of_id": i.fork_of_id,
        "fork_step": i.fork_step or None,
        "status_url": f"/api/instances/{i.id}",
    }


def instance_filters(
    *,
    workflow: str | None = None,
    status: str | None = None,
    tenant: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    id_prefix: str | None = None,
    attr: list[str] | None = None,
    sort: str | None = None,
    top_level: bool = False,
    parent: str | None = None,
) -> InstanceFilters:
    """The API's list parameters as the console's filters object, parsed by the same rules; a
    value that does not parse is a 400 naming every such value (the list never widens)."""
    query = QueryDict(mutable=True)
    query["top"] = "1" if top_level else "0"  # the API lists every instance unless asked
    for key, value in (
        ("workflow", workflow),
        ("status", status),
        ("tenant", tenant),
        ("id", id_prefix),
        ("sort", sort),
        ("parent", parent),
    ):
        if value:
            query[key] = value
    query.setlist("attr", list(attr or []))
    filters = InstanceFilters.from_query(query)
    if filters.problems:
        raise ApiProblem(400, "invalid_filter", "; ".join(filters.problems))
    return replace(filters, since=as_utc(since, what="since"), until=as_utc(until, what="until"))


def instance_page(
    *, user: Any, cursor: str | None = None, limit: int = 50, page: int = 1, **filters: Any
) -> dict[str, Any]:
    """The console's list selector in the API's shape: newest first, keyset-paginated on
    (created_at, id) so pages stay stable under inserts (`next_cursor`); another `sort` pages by
    number (`next_page`). `status` may list several (comma-separated); `attr` filters by search
    attributes in dashboard/attr_query.py's grammar (`customer:acme|globex`, `amount>=100`,
    `!region:eu`; repeatable); `top_level` leaves out fan-out items and child runs; `parent` lists
    one instance's."""
    parsed = instance_filters(**filters)
    limit = max(1, min(limit, MAX_LIMIT))
    after = None
    if cursor and parsed.keyset:
        after = Cursor.decode(cursor)
        if after is None:
            # Opaque to the client, so not malformed input but a page that is not there.
            raise ApiProblem(
                404,
                "cursor_not_found",
                "the cursor names no page of this list; pass next_cursor from the previous page unchanged",
            )
    found = instance_list(user=user, filters=parsed, after=after, limit=limit, page=max(1, page))
    items = _with_attributes(found.rows)
    if not parsed.keyset:
        return {"items": items, "next_cursor": None, "next_page": found.page_number + 1 if found.has_more else None}
    return {"items": items, "next_cursor": found.next_cursor.encode() if found.next_cursor else None}


def _with_attributes(rows: list[Instance]) -> list[dict[str, Any]]:
    attrs = instance_attributes(ids=[r.id for r in rows])
    return [{**instance_dict(i), "search_attributes": attrs.get(i.id, {})} for i in rows]


def instance_visible(*, tenants: Collection[str], instance_id: str) -> Instance | None:
    return Instance.objects.filter(pk=instance_id, tenant__in=list(tenants)).first()


def _progress(report: dict[str, Any] | None, *, sensitive: bool) -> dict[str, Any] | None:
    if report is None or not sensitive or not report.get("message"):
        return report
    return {**report, "message": REDACTED}  # a sensitive step's words stay out of every answer


def instance_detail(instance: Instance) -> dict[str, Any]:
    progress = step_progress(instance_id=instance.id)
    steps = []
    for s in Step.objects.filter(instance=instance).order_by("position", "id").prefetch_related("attempt_rows"):
        for_good = failed_for_good(
            status=s.status,
            error_name=s.error_name,
            attempts=s.attempts,
            config=s.config if isinstance(s.config, dict) else {},
        )
        steps.append(
            {
                "non_retryable": for_good and s.kind != StepKind.ROLLBACK,
                "name": s.name,
                "seq": s.seq,
                "position": s.position,
                "kind": s.kind,
                "status": s.status,
                "result": (REDACTED if s.result is not None else None) if s.sensitive else s.result,
                "error": _error(s.error_name, s.error_message),
                "started_at": s.started_at,
                "ended_at": s.ended_at,
                "wake_at": s.wake_at,
                "sensitive": s.sensitive,
                "config": stored_config_json(s.config),
                "progress": _progress(progress_of(progress, s.name, s.seq), sensitive=s.sensitive),
                "attempts": [
                    {
                        "number": a.number,
                        "started_at": a.started_at,
                        "ended_at": a.ended_at,
                        "ok": a.ok,
                        "error": _error(a.error_name, a.error_message),
                        "retry_delay_seconds": a.retry_delay_seconds,
                    }
                    for a in sorted(s.attempt_rows.all(), key=lambda a: a.number)
                ],
            }
        )
    forks = list(
        Instance.objects.filter(fork_of_id=instance.id, tenant=instance.tenant)
        .order_by("created_at", "id")
        .values_list("id", flat=True)
    )
    non_retryable = instance.status == InstanceStatus.ERRORED and any(step["non_retryable"] for step in steps)
    return {
        **instance_dict(instance),
        "steps": steps,
        "forks": forks,
        "non_retryable": non_retryable,
        "version": instance_version(instance_id=instance.id),
    }


def history_page(*, instance: Instance, after: int | None, limit: int) -> dict[str, Any]:
    limit = max(1, min(limit, 500))
    qs = History.objects.filter(instance=instance).order_by("id")
    if after:
        qs = qs.filter(id__gt=after)
    rows = list(qs[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return {
        "items": [
            {
                "id": h.id,
                "kind": h.kind,
                "step_name": h.step_name,
                "status": h.status,
                "data": h.data if isinstance(h.data, dict) else {"value": h.data},
                "actor": h.actor,
                "reason": h.reason,
                "created_at": h.created_at,
            }
            for h in rows
        ],
        "next_after": rows[-1].id if more else None,
    }


def workflow_counts(*, tenants: Collection[str]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for row in Instance.objects.filter(tenant__in=list(tenants)).values("workflow", "status").annotate(n=Count("id")):
        counts.setdefault(row["workflow"], {})[row["status"]] = row["n"]
    return counts


def cost_summary(
    *,
    tenants: Collection[str],
    since: datetime | None,
    until: datetime | None,
    tenant: str | None,
    service: str | None,
    workflow: str | None,
    instance_id: str | None,
    limit: int,
) -> dict[str, Any]:
    since, until = as_utc(since, what="since"), as_utc(until, what="until")
    qs = _given(
        ApiCost.objects.filter(tenant__in=list(tenants)),
        created_at__gte=since,
        created_at__lt=until,
        tenant=tenant,
        service=service,
        workflow_type=workflow,
        instance_id=instance_id,
    )
    by_service = [
        {"service": r["service"], "cost": r["total"] or Decimal("0"), "calls": r["calls"]}
        for r in qs.values("service").annotate(total=Sum("cost"), calls=Count("id")).order_by("-total")
    ]
    items = list(qs.order_by("-created_at", "-id")[: max(1, min(limit, MAX_LIMIT))])
    return {
        "total": sum((r["cost"] for r in by_service), Decimal("0")),
        "by_service": by_service,
        "items": items,
    }


def budget_list(*, tenants: Collection[str]) -> list[Budget]:
    """Tenant budgets of the caller's tenants, plus the global ones (workflow and service)."""
    instance_ids = Instance.objects.filter(tenant__in=list(tenants)).values("id")
    return list(
        Budget.objects.filter(
            Q(scope=BudgetScope.TENANT, key__in=list(tenants))
            | Q(scope__in=[BudgetScope.WORKFLOW, BudgetScope.SERVICE])
            | Q(scope=BudgetScope.INSTANCE, key__in=instance_ids)
        ).order_by("scope", "key", "period")
    )
