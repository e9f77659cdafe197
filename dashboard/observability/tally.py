"""Counters and histograms folded from the history table, kept in `MetricTally`.

Every engine write that a counter counts (an instance created or finished, a step attempt, a
retry, a cost) writes a history row in the same transaction, so the history is the one place
to count from, whatever process did the work. `fold` turns rows into increments (pure);
`tally_advance` adds the settled rows after the cursor to the stored tally under a row lock
(one process at a time; the others skip); `tally_snapshot` reads the tally and the cursor in
one SELECT and folds the few rows after the cursor in memory, so a scrape is exact and current.

A history id is taken before its transaction commits, so a row may appear below ids already
seen. Only rows older than `SETTLE` are stored, which leaves that long for such a transaction
to commit (the engine's last seconds at most); the newer rows are folded at each read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from dashboard.observability.models import MetricTally
from ingest.engine.models import History, HistoryKind, Instance

SEP = "\x1f"
SETTLE = timedelta(seconds=30)
BATCH = 20_000  # rows per stored advance
LIVE_LIMIT = 20_000  # rows a read folds in memory past the stored cursor
MAX_STEPS_PER_WORKFLOW = 100  # past this, a workflow's new step names count as "other"

STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
INSTANCE_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 10800.0, 21600.0, 86400.0)
FINISHED = ("complete", "completed_with_errors", "errored", "terminated")
KINDS = (
    HistoryKind.INSTANCE_CREATED,
    HistoryKind.INSTANCE_STATUS,
    HistoryKind.STEP_COMPLETED,
    HistoryKind.STEP_RETRY,
    HistoryKind.STEP_FAILED,
    HistoryKind.COST_RECORDED,
)

# The tally's series: name -> its label names (histograms keep `le` as the bucket's index).
LABELS: dict[str, tuple[str, ...]] = {
    "started": ("workflow",),
    "finished": ("workflow", "outcome"),
    "attempts": ("workflow", "step"),
    "failures": ("workflow", "step"),
    "retries": ("workflow", "step"),
    "step_seconds": ("workflow", "step", "le"),
    "step_seconds_sum": ("workflow", "step"),
    "step_seconds_count": ("workflow", "step"),
    "instance_seconds": ("workflow", "outcome", "le"),
    "instance_seconds_sum": ("workflow", "outcome"),
    "instance_seconds_count": ("workflow", "outcome"),
    "cost": ("service", "workflow", "tenant"),
}

Series = tuple[str, tuple[str, ...]]

_SEQ = re.compile(r"#\d+$")
_NUMBERED = re.compile(r"([-_.])\d+$")


@dataclass(frozen=True)
class Row:
    """What a counter needs of one history row."""

    id: int
    kind: str
    status: str
    workflow: str
    tenant: str
    step: str
    data: dict[str, Any]
    created_at: datetime
    instance_created_at: datetime | None


def step_label(name: str) -> str:
    """A step's label: its name without the occurrence (`#2`) and with a trailing number
    (`persist-facts-3`) turned into N, so a workflow's numbered steps share one series."""
    return _NUMBERED.sub(r"\1N", _SEQ.sub("", name))[:120]


def bucket_index(seconds: float, bounds: tuple[float, ...]) -> int:
    """The first bucket whose upper bound holds `seconds`; len(bounds) is +Inf."""
    for i, bound in enumerate(bounds):
        if seconds <= bound:
            return i
    return len(bounds)


def known_steps(values: dict[Series, float]) -> dict[str, set[str]]:
    """The step labels each workflow already has a series for."""
    out: dict[str, set[str]] = {}
    for metric, labels in values:
        if metric == "attempts":
            out.setdefault(labels[0], set()).add(labels[1])
    return out


def _add(into: dict[Series, float], metric: str, labels: tuple[str, ...], by: float = 1.0) -> None:
    key = (metric, labels)
    into[key] = into.get(key, 0.0) + by


def _observe(
    into: dict[Series, float], metric: str, labels: tuple[str, ...], seconds: float, bounds: tuple[float, ...]
) -> None:
    _add(into, metric, (*labels, str(bucket_index(seconds, bounds))))
    _add(into, f"{metric}_sum", labels, seconds)
    _add(into, f"{metric}_count", labels)


def _step(row: Row, steps: dict[str, set[str]]) -> str:
    label = step_label(row.step)
    seen = steps.setdefault(row.workflow, set())
    if label not in seen:
        if len(seen) >= MAX_STEPS_PER_WORKFLOW:
            return "other"
        seen.add(label)
    return label


def fold(rows: Iterable[Row], *, into: dict[Series, float], steps: dict[str, set[str]]) -> None:
    """Add the counters' increments for `rows` to `into`. `steps`: the step labels per workflow
    that already have series (updated here), which bounds a workflow's step labels."""
    for row in rows:
        kind = row.kind
        if kind == HistoryKind.INSTANCE_CREATED:
            _add(into, "started", (row.workflow,))
        elif kind == HistoryKind.INSTANCE_STATUS:
            if row.status in FINISHED:
                _add(into, "finished", (row.workflow, row.status))
                if row.instance_created_at is not None:
                    seconds = max(0.0, (row.created_at - row.instance_created_at).total_seconds())
                    _observe(into, "instance_seconds", (row.workflow, row.status), seconds, INSTANCE_BUCKETS)
        elif kind == HistoryKind.COST_RECORDED:
            _add(
                into,
                "cost",
                (str(row.data.get("service", "")), row.workflow, row.tenant),
                float(row.data.get("cost") or 0),
            )
        elif "attempt" in row.data and not row.data.get("rollback"):
            # A step attempt's end: sleeps, event waits and rollbacks carry no attempt number.
            labels = (row.workflow, _step(row, steps))
            _add(into, "attempts", labels)
            if kind == HistoryKind.STEP_RETRY:
                _add(into, "retries", labels)
            elif kind == HistoryKind.STEP_FAILED:
                _add(into, "failures", labels)
            elif "ms" in row.data:
                _observe(into, "step_seconds", labels, float(row.data["ms"]) / 1000.0, STEP_BUCKETS)


# ---- the stored tally ----------------------------------------------------------------------


def tally_read() -> tuple[int, dict[Series, float]]:
    """The stored cursor and series, from one SELECT (so they agree with each other)."""
    cursor, values = 0, {}
    for metric, labels, value in MetricTally.objects.values_list("metric", "labels", "value"):
        if metric == MetricTally.CURSOR:
            cursor = int(value)
        else:
            values[(metric, tuple(labels.split(SEP)))] = value
    return cursor, values


def rows_after(cursor: int, *, limit: int) -> list[Row]:
    """The counted history rows after `cursor`, oldest first."""
    rows = list(
        History.objects.filter(id__gt=cursor, kind__in=KINDS)
        .order_by("id")
        .values_list("id", "kind", "status", "workflow", "tenant", "step_name", "data", "created_at", "instance_id")[
            :limit
        ]
    )
    # Only a finish needs its instance's creation time: one lookup for those, not a join per row.
    finished = {r[8] for r in rows if r[1] == HistoryKind.INSTANCE_STATUS and r[2] in FINISHED}
    created = dict(Instance.objects.filter(id__in=finished).values_list("id", "created_at")) if finished else {}
    return [Row(*r[:8], created.get(r[8])) for r in rows]


@dataclass(frozen=True)
class Snapshot:
    values: dict[Series, float]
    lag_rows: int  # history rows not counted yet (a read folds at most LIVE_LIMIT)


def tally_snapshot(*, live_limit: int = LIVE_LIMIT) -> Snapshot:
    cursor, values = tally_read()
    rows = rows_after(cursor, limit=live_limit)
    fold(rows, into=values, steps=known_steps(values))
    lag = 0
    if len(rows) >= live_limit:
        newest = History.objects.aggregate(m=Max("id"))["m"] or 0
        lag = max(0, newest - rows[-1].id)
    return Snapshot(values, lag)


def _cursor_row() -> MetricTally | None:
    """The cursor row, locked; None when another process holds it (it is advancing)."""
    row = MetricTally.objects.select_for_update(skip_locked=True).filter(metric=MetricTally.CURSOR, labels="").first()
    if row is not None:
        return row
    if MetricTally.objects.filter(metric=MetricTally.CURSOR, labels="").exists():
        return None  # locked by another
    try:
        with transaction.atomic():
            return MetricTally.objects.create(metric=MetricTally.CURSOR, labels="", value=0)
    except IntegrityError:  # another process created it just now
        return None


def tally_advance(*, now: datetime, batch: int = BATCH, settle: timedelta = SETTLE) -> int:
    """Store the counts of up to `batch` settled history rows after the cursor. Returns how
    many rows were folded (0 when another process is advancing)."""
    with transaction.atomic():
        cursor_row = _cursor_row()
        if cursor_row is None:
            return 0
        cursor, values = tally_read()
        # Stop at the first unsettled row: rows after it are stored only once it has settled.
        rows = rows_after(cursor, limit=batch)
        kept: list[Row] = []
        for r in rows:
            if r.created_at >= now - settle:
                break
            kept.append(r)
        if not kept:
            return 0
        delta: dict[Series, float] = {}
        fold(kept, into=delta, steps=known_steps(values))
        MetricTally.objects.bulk_create(
            [
                MetricTally(metric=m, labels=SEP.join(labels), value=values.get((m, labels), 0.0) + by)
                for (m, labels), by in delta.items()
            ],
            update_conflicts=True,
            unique_fields=["metric", "labels"],
            update_fields=["value"],
        )
        cursor_row.value = kept[-1].id
        cursor_row.save(update_fields=["value"])
    return len(kept)
