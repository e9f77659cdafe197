"""What changed since the rollups were computed: pure bookkeeping over history rows.

Every write the engine makes to steps or api_costs writes a history row of the instance in the
same transaction. So the history rows after the roller's cursor name everything the rollups do
not reflect yet: the hours whose step or cost figures moved, and the instances whose spend did.

- a row of an instance dirties the hours its current steps started in (a step that completes,
  retries or wakes counts in the hour it *started*, possibly days ago);
- an operator row (retry, restart) may have deleted steps: it dirties every hour of the
  instance's history span, padded for clock skew between hosts (`history_span_hours`);
- a `cost.recorded` row dirties the hour it was recorded in (api_costs.created_at is the same
  instant) and its instance's per-instance spend.

History ids come from a sequence, so a transaction that took id 41 may commit after one that
took 42: `cursor_advance` remembers such holes until they fill or can no longer fill.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from dashboard.rollups.sql import Touch

COST_RECORDED = "cost.recorded"
OPERATOR = "operator"
SKEW = timedelta(minutes=5)  # clocks of workers and web processes may disagree this much
HOLE_KEEP_SECONDS = 10.0  # at least this long, whatever the database says
MAX_HOLES = 10_000


def hour_of(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def hours_between(start: datetime, end: datetime) -> set[datetime]:
    """Every UTC hour that [start, end] touches."""
    out, h = set(), hour_of(start)
    while h <= end:
        out.add(h)
        h += timedelta(hours=1)
    return out


@dataclass(frozen=True)
class Dirty:
    step_hours: frozenset[datetime] = frozenset()
    step_instances: frozenset[str] = frozenset()  # whose steps changed: read them by instance
    cost_hours: frozenset[datetime] = frozenset()
    cost_instances: frozenset[str] = frozenset()


@dataclass
class Touched:
    """The first pass over history rows: what to look up before the hours are known."""

    step_instances: set[str] = field(default_factory=set)
    span_instances: set[str] = field(default_factory=set)
    hours: set[datetime] = field(default_factory=set)
    cost_hours: set[datetime] = field(default_factory=set)
    cost_instances: set[str] = field(default_factory=set)


def touched(rows: Iterable[Touch]) -> Touched:
    t = Touched()
    for r in rows:
        if r.kind == COST_RECORDED:
            t.cost_hours.add(hour_of(r.created_at))
            if r.instance_id:
                t.cost_instances.add(r.instance_id)
        if not r.instance_id:
            continue
        t.step_instances.add(r.instance_id)
        t.hours.add(hour_of(r.created_at))
        if r.kind == OPERATOR:
            t.span_instances.add(r.instance_id)
    return t


def history_span_hours(times: Iterable[tuple[str, datetime, bool]]) -> set[datetime]:
    """Every hour between each instance's first and last history row, padded by SKEW: where any
    step it ever had (deleted ones included) can have started."""
    spans: dict[str, tuple[datetime, datetime]] = {}
    for instance_id, at, _rollback in times:
        lo, hi = spans.get(instance_id, (at, at))
        spans[instance_id] = (min(lo, at), max(hi, at))
    out: set[datetime] = set()
    for lo, hi in spans.values():
        out |= hours_between(lo - SKEW, hi + SKEW)
    return out


def dirty_of(t: Touched, *, step_hours: Iterable[datetime], span_hours: Iterable[datetime]) -> Dirty:
    return Dirty(
        step_hours=frozenset({*t.hours, *(hour_of(h) for h in step_hours), *span_hours}),
        step_instances=frozenset(t.step_instances),
        cost_hours=frozenset(t.cost_hours),
        cost_instances=frozenset(t.cost_instances),
    )


# ---- the cursor and its holes -----------------------------------------------------------------

Holes = dict[int, tuple[float, int]]  # id -> (when first seen missing, next transaction id then)


def cursor_advance(
    cursor: int, holes: Holes, ids: Iterable[int], *, now: float, horizon: tuple[int, int] | None
) -> tuple[int, Holes]:
    """Fold the ids just read into (cursor, holes).

    `horizon` is (oldest running transaction, next transaction id) on PostgreSQL: a hole seen when
    the next id was X can no longer fill once the oldest running transaction is >= X. Elsewhere
    (SQLite: one writer at a time) a hole is kept HOLE_KEEP_SECONDS, as it is on PostgreSQL too.
    """
    next_xid = horizon[1] if horizon else 0
    holes = dict(holes)
    for i in sorted(set(ids)):
        if i > cursor:
            if i - cursor - 1 <= MAX_HOLES:
                for missing in range(cursor + 1, i):
                    holes[missing] = (now, next_xid)
            cursor = i
        else:
            holes.pop(i, None)
    oldest = horizon[0] if horizon else None
    kept = {
        i: (seen, xid)
        for i, (seen, xid) in holes.items()
        if now - seen < HOLE_KEEP_SECONDS or (oldest is not None and oldest < xid)
    }
    if len(kept) > MAX_HOLES:
        kept = dict(sorted(kept.items())[-MAX_HOLES:])
    return cursor, kept


IdRun = tuple[int, int]  # [first, last] consecutive ids


def id_runs(ids: Iterable[int]) -> list[IdRun]:
    """Ids as ascending runs of consecutive ids."""
    runs: list[IdRun] = []
    for i in sorted(set(ids)):
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def holes_to_json(holes: Holes) -> dict[str, list[float]]:
    """{"41": [seen, next xid]}; consecutive ids seen at once share one entry, "41-9000": the
    first pass watches up to FIRST_HOLE_SCAN ids, and every page reads the state row."""
    out: dict[str, list[float]] = {}
    first = last = -1
    mark: tuple[float, int] | None = None
    for i in sorted(holes):
        if mark is not None and i == last + 1 and holes[i] == mark:
            last = i
            continue
        if mark is not None:
            out[_run_key(first, last)] = [*mark]
        first = last = i
        mark = holes[i]
    if mark is not None:
        out[_run_key(first, last)] = [*mark]
    return out


def _run_key(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def _run_of(key: str) -> IdRun:
    first, _, last = key.partition("-")
    return int(first), int(last or first)


def holes_from_json(data: object) -> Holes:
    if not isinstance(data, dict):
        return {}
    out: Holes = {}
    for key, (seen, xid) in data.items():
        first, last = _run_of(key)
        out.update(dict.fromkeys(range(first, last + 1), (float(seen), int(xid))))
    return out


def hole_runs_from_json(data: object) -> list[IdRun]:
    """The watched ids as runs, without expanding them: what a page needs to read them."""
    if not isinstance(data, dict):
        return []
    runs = sorted(_run_of(key) for key in data)
    merged: list[IdRun] = []
    for first, last in runs:
        if merged and first == merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], last)
        else:
            merged.append((first, last))
    return merged
