"""Every query the rollups make on the ledger, one typed function each.

The same aggregate functions serve the roller (whole hours, to store) and the pages (the ranges
the rollups cannot answer yet, to merge): a figure is computed one way whichever side reads it.
Hours are UTC hours (`TruncHour(..., tzinfo=UTC)`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, cast

from django.db import connection
from django.db.models import Aggregate, Count, F, Max, Min, Q, QuerySet, Sum
from django.db.models.expressions import RawSQL
from django.db.models.functions import TruncHour

from dashboard.models import INSTANCE_PART_COSTS
from dashboard.rollups import hist
from ingest.engine import ByVendor
from ingest.engine.models import ApiCost, History, Instance, RetentionBatch, Step, StepStatus

Range = tuple[datetime, datetime | None]  # [start, end); end None: open

IN_FLIGHT = (StepStatus.RUNNING, StepStatus.SLEEPING, StepStatus.WAITING)


def ranges_q(field: str, ranges: Sequence[Range]) -> Q:
    q = Q(pk__in=[])
    for start, end in ranges:
        bounds = {f"{field}__gte": start} | ({} if end is None else {f"{field}__lt": end})
        q |= Q(**bounds)
    return q


class _SqliteDialect:
    """What the rollups' queries say differently on SQLite: no transaction ids to watch (one
    writer at a time, a hole never fills later), julianday for a duration, MIN of two values,
    and statistics the planner keeps without being asked."""

    least = "MIN"
    duration_ms_sql = '(julianday("engine_step"."ended_at") - julianday("engine_step"."started_at")) * 86400000.0'

    def transaction_horizon(self) -> tuple[int, int] | None:
        return None

    def analyze(self) -> None:
        pass


class _PostgresDialect(_SqliteDialect):
    least = "LEAST"
    duration_ms_sql = 'EXTRACT(EPOCH FROM ("engine_step"."ended_at" - "engine_step"."started_at")) * 1000'

    def transaction_horizon(self) -> tuple[int, int] | None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint "
                "FROM pg_current_snapshot() AS s"
            )
            row = cursor.fetchone()
        return int(row[0]), int(row[1])

    def analyze(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE " + ", ".join(ROLLUP_TABLES))


_dialect = ByVendor[_SqliteDialect](postgresql=_PostgresDialect(), sqlite=_SqliteDialect())


# ---- history: what changed since the roller's cursor ----------------------------------------


@dataclass(frozen=True)
class Touch:
    """One history row, as far as the rollups care."""

    id: int
    instance_id: str | None
    kind: str
    created_at: datetime
    rollback: bool


def history_touches(*, after: int, also: Sequence[tuple[int, int]], limit: int) -> list[Touch]:
    """History rows with id > `after` or in the [first, last] runs `also` (holes being watched),
    ids ascending. A run is one index range: the roller's first pass may watch 10,000 ids, read on
    every page, that a list would make a query of 10,000 terms to parse and plan."""
    q = Q(id__gt=after)
    singles: list[int] = []
    for first, last in also:
        if last - first >= 2:
            q |= Q(id__gte=first, id__lte=last)
        else:
            singles.extend(range(first, last + 1))
    if singles:
        q |= Q(id__in=singles)
    rows = (
        History.objects.filter(q).order_by("id").values_list("id", "instance_id", "kind", "created_at", "data")[:limit]
    )
    return [
        Touch(i, inst, kind, at, bool(isinstance(data, dict) and data.get("rollback")))
        for i, inst, kind, at, data in rows
    ]


def history_max_id() -> int:
    return History.objects.aggregate(m=Max("id"))["m"] or 0


def history_ids_between(*, low: int, high: int) -> list[int]:
    """Ids present in (low, high]: the roller's first pass finds the holes below its cursor."""
    return list(History.objects.filter(id__gt=low, id__lte=high).values_list("id", flat=True))


def history_times_of(*, instance_ids: Collection[str]) -> list[tuple[str, datetime, bool]]:
    """(instance, created_at, is a rollback step's row) of every history row of these instances,
    in id order: the times their steps were written (see dirty.py)."""
    rows = (
        History.objects.filter(instance_id__in=list(instance_ids))
        .order_by("instance_id", "id")
        .values_list("instance_id", "created_at", "data")
    )
    return [(i, at, bool(isinstance(d, dict) and d.get("rollback"))) for i, at, d in rows]


def step_ids_of(*, instance_ids: Collection[str]) -> list[tuple[int, datetime]]:
    """(id, UTC hour it started) of the current steps of these instances (the engine's
    step_occurrence index leads with the instance)."""
    return list(
        Step.objects.filter(instance_id__in=list(instance_ids))
        .annotate(h=TruncHour("started_at", tzinfo=UTC))
        .values_list("id", "h")
    )


def step_hour_ids_all() -> list[tuple[datetime, int, int]]:
    """(UTC hour, lowest id, highest id) of the steps started in each hour: one scan of the table,
    for the roller's first pass."""
    return list(
        Step.objects.annotate(h=TruncHour("started_at", tzinfo=UTC))
        .values("h")
        .annotate(lo=Min("id"), hi=Max("id"))
        .order_by()
        .values_list("h", "lo", "hi")
    )


def transaction_horizon() -> tuple[int, int] | None:
    """(oldest running transaction, next transaction id) on PostgreSQL; None elsewhere.

    A hole in the history ids is a transaction still running or one that rolled back; once every
    transaction that was running when the hole was seen has ended, it can no longer fill.
    """
    return _dialect().transaction_horizon()


# ---- steps ------------------------------------------------------------------------------------


_STATUS_COL = '"engine_step"."status"'
_ENDED_COL = '"engine_step"."ended_at"'


IdRange = tuple[int, int]  # [lowest, highest] step id


@dataclass(frozen=True)
class StepRows:
    """Where the steps started in some time ranges are: id ranges of the primary key (from the
    roller's StepHourIds) and the instances whose steps changed since the roller last looked."""

    ids: Sequence[IdRange] = ()
    instance_ids: Collection[str] = ()


def _steps_in(
    ranges: Sequence[Range], where: StepRows, *, workflow: str | None, tenants: Collection[str] | None
) -> QuerySet[Step]:
    # The engine indexes neither steps' start time nor (for all steps) their status: the id
    # ranges and the instances say where to look, `started_at` then says exactly what counts.
    located = Q(pk__in=[])
    for lo, hi in where.ids:
        located |= Q(id__gte=lo, id__lte=hi)
    if where.instance_ids:
        located |= Q(instance_id__in=list(where.instance_ids))
    qs = Step.objects.filter(located).filter(ranges_q("started_at", ranges))
    if workflow is not None:
        qs = qs.filter(instance__workflow=workflow)
    if tenants is not None:
        qs = qs.filter(instance__tenant__in=list(tenants))
    return qs


StepKey = tuple[datetime, str, str, str]  # (hour, workflow, tenant, step name)


@dataclass
class StepFigures:
    n: int = 0
    in_flight: int = 0
    completed: int = 0
    errored: int = 0
    retried: int = 0
    attempts: int = 0
    durations: hist.Counts | None = None

    def add(self, other: StepFigures) -> None:
        self.n += other.n
        self.in_flight += other.in_flight
        self.completed += other.completed
        self.errored += other.errored
        self.retried += other.retried
        self.attempts += other.attempts
        if other.durations:
            self.durations = self.durations or {}
            for k, c in other.durations.items():
                self.durations[k] = self.durations.get(k, 0) + c


def step_aggregate(
    ranges: Sequence[Range],
    where: StepRows,
    *,
    workflow: str | None = None,
    tenants: Collection[str] | None = None,
) -> dict[StepKey, StepFigures]:
    """Steps started in `ranges` (found where `where` says), per (UTC hour, workflow, tenant,
    step name)."""
    if not ranges or not (where.ids or where.instance_ids):
        return {}
    dialect = _dialect()
    # One scan: grouped by duration bin too (NULL but for completed steps), the counts summed here.
    binned = (
        f"CASE WHEN {_STATUS_COL} = 'complete' AND {_ENDED_COL} IS NOT NULL THEN "
        f"{hist.bin_sql(dialect.duration_ms_sql, least=dialect.least)} END"
    )
    qs = _steps_in(ranges, where, workflow=workflow, tenants=tenants).annotate(
        hour=TruncHour("started_at", tzinfo=UTC),
        wf=F("instance__workflow"),
        tn=F("instance__tenant"),
        bin=RawSQL(binned, ()),
    )
    out: dict[StepKey, StepFigures] = {}
    for r in (
        qs.values("hour", "wf", "tn", "name", "bin")
        .annotate(
            n=Count("id"),
            in_flight=Count("id", filter=Q(status__in=IN_FLIGHT)),
            completed=Count("id", filter=Q(status=StepStatus.COMPLETE)),
            errored=Count("id", filter=Q(status=StepStatus.ERRORED)),
            retried=Count("id", filter=Q(attempts__gt=1)),
            attempts=Sum("attempts"),
        )
        .order_by()
    ):
        fig = out.setdefault((r["hour"], r["wf"], r["tn"], r["name"]), StepFigures())
        fig.add(
            StepFigures(
                r["n"],
                r["in_flight"],
                r["completed"],
                r["errored"],
                r["retried"],
                r["attempts"] or 0,
                None if r["bin"] is None else {int(r["bin"]): r["completed"]},
            )
        )
    return out


# ---- costs ------------------------------------------------------------------------------------


CostKey = tuple[datetime, str, str, str, str, str]  # (hour, tenant, service, workflow, step, model)
COST_KEY_FIELDS = ("tenant", "service", "workflow_type", "step_name", "model")


def spend_sums() -> dict[str, Aggregate]:
    """What every spend rollup and list sums over api_costs rows: total cost, calls, failed calls,
    tokens in and out (one definition, so the tables and the lists read from the rows agree)."""
    return {
        "total": Sum("cost"),
        "calls": Count("id"),
        "failed": Count("id", filter=Q(success=False)),
        "tokens_in": Sum("tokens_in"),
        "tokens_out": Sum("tokens_out"),
    }


def costs_in(ranges: Sequence[Range]) -> QuerySet[ApiCost]:
    return ApiCost.objects.filter(ranges_q("created_at", ranges))


def cost_hour_rows(ranges: Sequence[Range]) -> Iterable[dict[str, Any]]:
    """api_costs in `ranges` per (UTC hour, tenant, service, workflow, step, model)."""
    if not ranges:
        return []
    rows: Iterable[dict[str, Any]] = (
        costs_in(ranges)
        .annotate(hour=TruncHour("created_at", tzinfo=UTC))
        .values("hour", *COST_KEY_FIELDS)
        .annotate(**spend_sums())
        .order_by()
    )
    return rows


def instance_cost_rows(*, instance_ids: Collection[str]) -> Iterable[dict[str, Any]]:
    """Per instance (and the tenant and workflow its rows carry): lifetime spend and span."""
    rows = cast(
        "Iterable[dict[str, Any]]",
        (
            ApiCost.objects.filter(instance_id__in=list(instance_ids))
            .values("instance_id", "tenant", "workflow_type")
            .annotate(first_at=Min("created_at"), last_at=Max("created_at"), **spend_sums())
            .order_by()
        ),
    )
    return rows


def instance_part_cost_rows(column: str, *, instance_ids: Collection[str]) -> Iterable[dict[str, Any]]:
    """Per instance and value of `column` (service, step_name or model; not empty), with the tenant
    and workflow its rows carry: lifetime spend and span."""
    rows = cast(
        "Iterable[dict[str, Any]]",
        (
            ApiCost.objects.filter(instance_id__in=list(instance_ids))
            .exclude(**{column: ""})
            .values("instance_id", "tenant", "workflow_type", column)
            .annotate(first_at=Min("created_at"), last_at=Max("created_at"), **spend_sums())
            .order_by()
        ),
    )
    return rows


def instance_costs_build_all() -> int:
    """The per-instance table from scratch, in the database (one statement over api_costs)."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM dashboard_instancecost")
        cursor.execute(
            "INSERT INTO dashboard_instancecost (instance_id, tenant, workflow_type, first_at, last_at, "
            "total, calls, failed, tokens_in, tokens_out) "
            "SELECT instance_id, tenant, workflow_type, MIN(created_at), MAX(created_at), SUM(cost), COUNT(*), "
            "SUM(CASE WHEN success THEN 0 ELSE 1 END), SUM(tokens_in), SUM(tokens_out) "
            "FROM api_costs WHERE instance_id IS NOT NULL GROUP BY instance_id, tenant, workflow_type"
        )
        built = int(cursor.rowcount)
        for column, model in INSTANCE_PART_COSTS.items():
            table = model._meta.db_table
            cursor.execute(f"DELETE FROM {table}")
            cursor.execute(
                f"INSERT INTO {table} (instance_id, tenant, workflow_type, {column}, first_at, last_at, total, "
                "calls, failed, tokens_in, tokens_out) "
                f"SELECT instance_id, tenant, workflow_type, {column}, MIN(created_at), MAX(created_at), SUM(cost), "
                "COUNT(*), SUM(CASE WHEN success THEN 0 ELSE 1 END), SUM(tokens_in), SUM(tokens_out) "
                f"FROM api_costs WHERE instance_id IS NOT NULL AND {column} <> '' "
                f"GROUP BY instance_id, tenant, workflow_type, {column}"
            )
        return built


ROLLUP_TABLES = (
    "dashboard_stephourly",
    "dashboard_stepdaily",
    "dashboard_costhourly",
    "dashboard_costdaily",
    "dashboard_instancecost",
    "dashboard_instanceservicecost",
    "dashboard_instancestepcost",
    "dashboard_instancemodelcost",
    "dashboard_stephourids",
    "dashboard_instancestate",
    "dashboard_instancehourly",
    "dashboard_instancedaily",
    "dashboard_instanceendedhourly",
)


def rollups_analyze() -> None:
    """Fresh planner statistics after a catch-up filled the tables (PostgreSQL). Without them the
    planner, taking a million-row table for empty, scanned it for a top-50 an index answers."""
    _dialect().analyze()


def costs_first_at() -> datetime | None:
    first: datetime | None = ApiCost.objects.aggregate(m=Min("created_at"))["m"]
    return first


ZERO = Decimal("0")


# ---- instances: the overview's counts -------------------------------------------------------

INSTANCE_STATE_FIELDS = ("instance_id", "tenant", "workflow", "status", "created_at", "ended_at", "running_steps")


def instance_states(*, instance_ids: Collection[str]) -> list[dict[str, Any]]:
    """These instances as the ledger holds them now (absent ones are missing), with how many of
    their steps run (the engine's step_occurrence index leads with the instance)."""
    ids = list(instance_ids)
    running = dict(
        Step.objects.filter(instance_id__in=ids, status=StepStatus.RUNNING)
        .values("instance_id")
        .annotate(n=Count("id"))
        .order_by()
        .values_list("instance_id", "n")
    )
    return [
        {
            "instance_id": i,
            "tenant": t,
            "workflow": w,
            "status": s,
            "created_at": c,
            "ended_at": e,
            "running_steps": running.get(i, 0),
        }
        for i, t, w, s, c, e in Instance.objects.filter(id__in=ids).values_list(
            "id", "tenant", "workflow", "status", "created_at", "ended_at"
        )
    ]


def instance_states_build_all() -> int:
    """InstanceState from scratch, in the database: one statement over the instances and the
    running steps (the step_running partial index)."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM dashboard_instancestate")
        cursor.execute(
            "INSERT INTO dashboard_instancestate (instance_id, tenant, workflow, status, created_at, ended_at, "
            "running_steps) "
            "SELECT i.id, i.tenant, i.workflow, i.status, i.created_at, i.ended_at, COALESCE(r.n, 0) "
            "FROM engine_instance i LEFT JOIN (SELECT instance_id, COUNT(*) AS n FROM engine_step "
            "WHERE status = 'running' GROUP BY instance_id) r ON r.instance_id = i.id"
        )
        return int(cursor.rowcount)


def retention_batches_after(after: int) -> list[tuple[int, str, datetime]]:
    """(id, workflow, cutoff) of the retention batches with id > `after`."""
    return list(RetentionBatch.objects.filter(id__gt=after).order_by("id").values_list("id", "workflow", "cutoff"))
