"""Layout of one run (pure: plain values in, plain values out, `now` passed in): the waterfall
of steps and attempts, and the DAG ranks of what ran in parallel."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ingest.engine.models import (
    Attempt,
    Step,
)

# ---- layout of one run (pure: plain values in, plain values out, `now` passed in) ----------


@dataclass(frozen=True)
class Segment:
    """A span on the waterfall, in percent of the run's time axis."""

    left: float
    width: float
    css: str  # ok | failed | running | sleep | wait | gap
    label: str


@dataclass(frozen=True)
class WaterfallRow:
    name: str
    seq: int
    kind: str
    status: str
    segments: list[Segment]
    seconds: float | None


def _pct(t: datetime, t0: datetime, span: float) -> float:
    return max(0.0, min(100.0, (t - t0).total_seconds() / span * 100.0))


def waterfall(
    steps: list[tuple[Step, list[Attempt]]], *, start: datetime, now: datetime
) -> tuple[list[WaterfallRow], list[tuple[float, str]]]:
    """One row per step: a bar per attempt, and the retry delay between attempts as a gap.
    Sleeps and event waits run until they end or, still open, until now."""
    if not steps:
        return [], []
    t0 = min([start] + [s.started_at for s, _ in steps])
    ends: list[datetime] = [now if s.ended_at is None else s.ended_at for s, _ in steps]
    for _, atts in steps:
        ends += [a.ended_at or now for a in atts]
    t1 = max(ends)
    span = max((t1 - t0).total_seconds(), 0.001)
    rows: list[WaterfallRow] = []
    for step, atts in steps:
        segs: list[Segment] = []
        if step.kind in ("sleep", "wait_event"):
            end = step.ended_at or now
            css = "sleep" if step.kind == "sleep" else "wait"
            left = _pct(step.started_at, t0, span)
            segs.append(Segment(left, max(_pct(end, t0, span) - left, 0.3), css, f"{step.kind} until {end:%H:%M:%S}"))
        elif atts:
            for i, a in enumerate(atts):
                end = a.ended_at or now
                css = "ok" if a.ok else ("running" if a.ended_at is None else "failed")
                left = _pct(a.started_at, t0, span)
                label = f"attempt {a.number}: " + ("ok" if a.ok else a.error_name or css)
                segs.append(Segment(left, max(_pct(end, t0, span) - left, 0.3), css, label))
                if i + 1 < len(atts) and a.ended_at is not None:
                    nxt = atts[i + 1].started_at
                    gl = _pct(a.ended_at, t0, span)
                    delay = a.retry_delay_seconds if a.retry_delay_seconds is not None else (nxt - a.ended_at).total_seconds()
                    segs.append(Segment(gl, max(_pct(nxt, t0, span) - gl, 0.0), "gap", f"retry delay {delay:.1f}s"))
        else:
            end = step.ended_at or now
            left = _pct(step.started_at, t0, span)
            css = {"complete": "ok", "errored": "failed"}.get(step.status, "running")
            segs.append(Segment(left, max(_pct(end, t0, span) - left, 0.3), css, step.status))
        seconds = ((step.ended_at or now) - step.started_at).total_seconds()
        rows.append(WaterfallRow(step.name, step.seq, step.kind, step.status, segs, seconds))
    ticks: list[tuple[float, str]] = [(p, _tick(span * p / 100, span)) for p in (0, 25, 50, 75, 100)]
    return rows, ticks


def _tick(seconds: float, span: float) -> str:
    """An axis label in the unit the run's span calls for: a 7 ms run reads +0ms … +7ms, not
    +0.0s five times."""
    if span < 1:
        return f"+{seconds * 1000:.0f}ms" if span >= 0.02 else f"+{seconds * 1000:.1f}ms"
    if span < 120:
        return f"+{seconds:.1f}s"
    return f"+{seconds / 60:.1f}m"


@dataclass(frozen=True)
class FanOutBar:
    """A fan-out step's progress: one node with a received/expected bar, not N siblings."""

    received: int
    expected: int
    failed: int
    missing: int
    state: str

    @property
    def percent(self) -> float:
        return 100.0 if not self.expected else round(self.received / self.expected * 100, 1)


@dataclass(frozen=True)
class DagNode:
    name: str
    seq: int
    kind: str
    status: str
    attempts: int
    fan_out: FanOutBar | None = None
    fallback: bool = False  # it failed and the run went on without it (an all_settled branch)


@dataclass(frozen=True)
class DagRank:
    nodes: list[DagNode]


def dag_ranks(steps: list[Step], *, now: datetime,
              fan_outs: Mapping[int, Mapping[str, Any]] | None = None) -> list[DagRank]:
    """The run as the steps actually ran: a step that started before every step of the current
    rank ended ran in parallel with them (all_settled fan-out) and joins that rank. A
    `step.fan_out` is one node carrying its progress (`fan_outs`: engine's fan_out_list rows by
    step id). A step that failed while later steps ran is a fallback: the run degraded past it."""
    ordered = sorted(steps, key=lambda s: (s.started_at, s.position))
    ranks: list[list[Step]] = []
    rank_end: datetime | None = None
    for s in ordered:
        if ranks and rank_end is not None and s.started_at < rank_end:
            ranks[-1].append(s)
            rank_end = min(rank_end, s.ended_at or now)
        else:
            ranks.append([s])
            rank_end = s.ended_at or now
    bars = {step_id: FanOutBar(f["received"], f["expected"], f["failed"], f["missing"], f["state"])
            for step_id, f in (fan_outs or {}).items()}
    last = len(ranks) - 1
    return [DagRank([DagNode(s.name, s.seq, s.kind, s.status, s.attempts, bars.get(s.id),
                             fallback=s.status == "errored" and i < last) for s in r])
            for i, r in enumerate(ranks)]
