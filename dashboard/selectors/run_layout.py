"""Layout of one run (pure: plain values in, plain values out, `now` passed in): the waterfall
of steps and attempts, and the DAG ranks of what ran in parallel."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dashboard.selectors.run_turns import Turn
from ingest.engine.models import (
    Attempt,
    AttemptWait,
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


@dataclass(frozen=True)
class AxisBreak:
    """An idle stretch (a long sleep, event wait or retry delay) drawn narrow on the time axis so
    the steps around it stay readable; `label` says how long it really was."""

    left: float
    width: float
    seconds: float
    label: str


# An idle stretch is cut out of the axis when it is longer than this share of what is left of
# the run once the longer stretches are cut (so 10 s, 20 s and 40 s retry delays around 5 s of
# work all go), and at least MIN_BREAK_SECONDS (millisecond gaps are not waits).
BREAK_SHARE = 0.3
MIN_BREAK_SECONDS = 1.0
BREAK_WIDTH = 8.0  # percent of the axis a cut stretch keeps


class TimeAxis:
    """Maps instants to percent of the axis, linear except across the cut idle stretches."""

    def __init__(self, t0: datetime, t1: datetime, busy: list[tuple[datetime, datetime]]) -> None:
        self.t0 = t0
        self.span = max((t1 - t0).total_seconds(), 0.001)
        cuts = _idle_cuts(t0, t1, busy)
        # pieces: (start s, end s, left %, width %), seconds counted from t0
        kept = self.span - sum(b - a for a, b in cuts)
        scale = (100.0 - BREAK_WIDTH * len(cuts)) / max(kept, 0.001)
        self.pieces: list[tuple[float, float, float, float]] = []
        self.breaks: list[AxisBreak] = []
        at, left = 0.0, 0.0
        for a, b in cuts + [(self.span, self.span)]:
            if a > at:
                self.pieces.append((at, a, left, (a - at) * scale))
                left += (a - at) * scale
            if b > a:
                self.pieces.append((a, b, left, BREAK_WIDTH))
                self.breaks.append(AxisBreak(left, BREAK_WIDTH, b - a, _offset(b - a)))
                left += BREAK_WIDTH
            at = b

    def pct(self, t: datetime) -> float:
        x = (t - self.t0).total_seconds()
        if not self.breaks:
            return max(0.0, min(100.0, x / self.span * 100.0))
        for a, b, left, width in self.pieces:
            if x <= b:
                return max(0.0, min(100.0, left + (max(x, a) - a) / max(b - a, 1e-9) * width))
        return 100.0

    def ticks(self) -> list[tuple[float, str]]:
        if not self.breaks:
            return [(p, _tick(self.span * p / 100, self.span)) for p in (0, 25, 50, 75, 100)]
        # With cuts: the ends, and the middle of every stretch wide enough to hold a label.
        cut_lefts = {round(k.left, 6) for k in self.breaks}
        ticks: list[tuple[float, str]] = [(0.0, "+0")]
        for a, b, left, width in self.pieces:
            if round(left, 6) not in cut_lefts and width >= 24:
                ticks.append((left + width / 2, "+" + _offset((a + b) / 2)))
        ticks.append((100.0, "+" + _offset(self.span)))
        return ticks


def _idle_cuts(t0: datetime, t1: datetime, busy: list[tuple[datetime, datetime]]) -> list[tuple[float, float]]:
    """The idle stretches to cut, as (start, end) seconds from t0, in time order."""
    span = (t1 - t0).total_seconds()
    merged: list[list[float]] = []
    for a, b in sorted(((a - t0).total_seconds(), (b - t0).total_seconds()) for a, b in busy):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    if not merged:
        return []
    idle: list[tuple[float, float]] = []
    at = 0.0
    for a, b in merged:
        if a > at:
            idle.append((at, a))
        at = max(at, b)
    if span > at:
        idle.append((at, span))
    remaining, cuts = span, []
    for a, b in sorted(idle, key=lambda g: g[0] - g[1]):
        if b - a >= MIN_BREAK_SECONDS and b - a > BREAK_SHARE * remaining:
            cuts.append((a, b))
            remaining -= b - a
    return sorted(cuts)


def _offset(seconds: float) -> str:
    """A duration read at a glance: 850ms, 12.5s, 4m 05s, 2h 10m, 3d 4h."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{int(seconds // 60)}m {int(seconds % 60):02d}s"
    if seconds < 172800:
        return f"{int(seconds // 3600)}h {int(seconds % 3600 // 60):02d}m"
    return f"{int(seconds // 86400)}d {int(seconds % 86400 // 3600)}h"


@dataclass(frozen=True)
class TurnBar:
    """A turn on the waterfall's first row: where it sits on the axis and what it was."""

    turn: Turn
    left: float
    width: float
    label: str


@dataclass(frozen=True)
class Waterfall:
    rows: list[WaterfallRow]
    ticks: list[tuple[float, str]]
    breaks: list[AxisBreak]
    turns: list[TurnBar] = field(default_factory=list)


def _busy(steps: list[tuple[Step, list[Attempt]]], now: datetime) -> list[tuple[datetime, datetime]]:
    """When something ran: each attempt, or a step's whole span when it has no attempts.
    Sleeps, event waits and retry delays are the idle time between."""
    busy: list[tuple[datetime, datetime]] = []
    for step, atts in steps:
        if step.kind in ("sleep", "wait_event"):
            busy.append((step.started_at, step.started_at))
            if step.ended_at is not None:
                busy.append((step.ended_at, step.ended_at))
        elif atts:
            busy += [(a.started_at, a.ended_at or now) for a in atts]
        else:
            busy.append((step.started_at, step.ended_at or now))
    return busy


def waterfall(
    steps: list[tuple[Step, list[Attempt]]], *, start: datetime, now: datetime
) -> tuple[list[WaterfallRow], list[tuple[float, str]]]:
    """One row per step: a bar per attempt, and the retry delay between attempts as a gap.
    Sleeps and event waits run until they end or, still open, until now."""
    laid = waterfall_layout(steps, start=start, now=now)
    return laid.rows, laid.ticks


def waterfall_layout(
    steps: list[tuple[Step, list[Attempt]]], *, start: datetime, now: datetime, turns: list[Turn] | None = None
) -> Waterfall:
    """`waterfall`, with long idle stretches cut out of the time axis (`Waterfall.breaks`), and
    the run's `turns` (run_turns.py) as bars of their own on the same axis."""
    turns = turns or []
    if not steps and not turns:
        return Waterfall([], [], [])
    t0 = min([start] + [s.started_at for s, _ in steps] + [t.started for t in turns])
    ends: list[datetime] = [now if s.ended_at is None else s.ended_at for s, _ in steps]
    for _, atts in steps:
        ends += [a.ended_at or now for a in atts]
    ends += [t.ended or now for t in turns]
    t1 = max(ends)
    axis = TimeAxis(t0, t1, _busy(steps, now) + [(t.started, t.ended or now) for t in turns])
    pct = axis.pct
    rows: list[WaterfallRow] = []
    for step, atts in steps:
        segs: list[Segment] = []
        if step.kind in ("sleep", "wait_event"):
            end = step.ended_at or now
            css = "sleep" if step.kind == "sleep" else "wait"
            left = pct(step.started_at)
            took = _offset((end - step.started_at).total_seconds())
            segs.append(Segment(left, max(pct(end) - left, 0.3), css, f"{step.kind} {took}, until {end:%H:%M:%S}"))
        elif atts:
            for i, a in enumerate(atts):
                end = a.ended_at or now
                css = "ok" if a.ok else ("running" if a.ended_at is None else "failed")
                if a.error_name == AttemptWait.AWAITING_APPROVAL:  # a budget gate stopped it; not a failure
                    css = "wait"
                left = pct(a.started_at)
                label = f"attempt {a.number}: " + ("ok" if a.ok else a.error_name or css)
                segs.append(Segment(left, max(pct(end) - left, 0.3), css, label))
                if i + 1 < len(atts) and a.ended_at is not None:
                    nxt = atts[i + 1].started_at
                    gl = pct(a.ended_at)
                    delay = (
                        a.retry_delay_seconds
                        if a.retry_delay_seconds is not None
                        else (nxt - a.ended_at).total_seconds()
                    )
                    segs.append(Segment(gl, max(pct(nxt) - gl, 0.0), "gap", f"retry delay {delay:.1f}s"))
        else:
            end = step.ended_at or now
            left = pct(step.started_at)
            css = {"complete": "ok", "errored": "failed"}.get(step.status, "running")
            segs.append(Segment(left, max(pct(end) - left, 0.3), css, step.status))
        seconds = ((step.ended_at or now) - step.started_at).total_seconds()
        rows.append(WaterfallRow(step.name, step.seq, step.kind, step.status, segs, seconds))
    bars = [
        TurnBar(t, pct(t.started), max(pct(t.ended or now) - pct(t.started), 0.3), _turn_label(t, now)) for t in turns
    ]
    return Waterfall(rows, axis.ticks(), axis.breaks, bars)


def _turn_label(t: Turn, now: datetime) -> str:
    took = _offset(t.seconds(now))
    ended = f"left it {t.outcome}" if t.ended is not None else "still running"
    late = f"; started {_offset(t.late)} after its wake-up was due" if t.late is not None else ""
    at = t.started.strftime("%H:%M:%S.%f")[:-3]  # milliseconds
    return f"turn {t.number}: {took} from {at} UTC, {ended}{late}"


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
class DagGroup:
    """Many steps of one family (`persist-facts-1` … `-22`) drawn as one node: a tally by status
    and a small square per step, instead of a column or row of 22 boxes."""

    family: str
    nodes: list[DagNode]
    parallel: bool

    @property
    def names(self) -> list[str]:
        """Its steps' names without the family's common start, when few enough to read."""
        if len(self.nodes) > GROUP_OVER:
            return []
        cut = len(self.family) - 1 if self.family.endswith("*") else 0
        return [(n.name[cut:] or n.name) + (f" #{n.seq}" if n.seq > 1 else "") for n in self.nodes]

    @property
    def tally(self) -> list[tuple[str, int]]:
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.status] = counts.get(n.status, 0) + 1
        return sorted(counts.items(), key=lambda kv: -kv[1])

    @property
    def status(self) -> str:
        """The group's colour: the worst of its steps."""
        for worst in ("errored", "running", "paused", "sleeping", "waiting", "pending"):
            if any(n.status == worst for n in self.nodes):
                return worst
        return self.nodes[0].status if self.nodes else "complete"


@dataclass(frozen=True)
class DagRank:
    nodes: list[DagNode]
    group: DagGroup | None = None


# More steps of one family than this in a row of ranks (one after the other) are drawn as one
# group node; so is a rank of more than PARALLEL_OVER steps that ran together (a fan-out of
# step.all / all_settled), whatever their names: one node with its counts, not a stack.
GROUP_OVER = 6
PARALLEL_OVER = 2
_FAMILY = re.compile(r"[-_ .#]*\d+$")
_PREFIX_END = re.compile(r"^.*[-_ .:/]")


def step_family(name: str) -> str:
    """`persist-facts-12` → `persist-facts`; a name without a trailing number is its own family."""
    return _FAMILY.sub("", name) or name


def _family_of(rank: DagRank) -> str | None:
    families = {step_family(n.name) for n in rank.nodes}
    return families.pop() if len(families) == 1 else None


def _shared_start(nodes: list[DagNode]) -> str:
    """`fetch-*` for fetch-backlinks, fetch-keywords…: the names' common start up to a separator;
    "parallel steps" when they share none worth naming."""
    names = [n.name for n in nodes]
    first, last = min(names), max(names)
    common = first[: next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), len(first))]
    match = _PREFIX_END.match(common)
    return match.group(0) + "*" if match and len(match.group(0)) >= 3 else "parallel steps"


def _grouped(ranks: list[DagRank]) -> list[DagRank]:
    """Consecutive ranks whose steps all belong to one family (a fan-out that ran 9 at a time
    makes three ranks of `persist-facts-*`; a loop makes one rank per step) become one group node
    when they hold more than GROUP_OVER steps or ran more than PARALLEL_OVER at once; a rank of
    more than PARALLEL_OVER mixed steps becomes one too."""
    out: list[DagRank] = []
    block: list[DagRank] = []

    def flush() -> None:
        nodes = [n for r in block for n in r.nodes]
        if len(nodes) > GROUP_OVER or any(len(r.nodes) > PARALLEL_OVER for r in block):
            family = _family_of(block[0]) or "steps"
            out.append(DagRank(nodes, DagGroup(family, nodes, parallel=any(len(r.nodes) > 1 for r in block))))
        else:
            out.extend(block)
        block.clear()

    for rank in ranks:
        family = _family_of(rank)
        if family is None:
            flush()
            wide = len(rank.nodes) > PARALLEL_OVER
            out.append(
                DagRank(rank.nodes, DagGroup(_shared_start(rank.nodes), rank.nodes, parallel=True)) if wide else rank
            )
            continue
        if block and _family_of(block[0]) != family:
            flush()
        block.append(rank)
    flush()
    return out


def dag_ranks(
    steps: list[Step], *, now: datetime, fan_outs: Mapping[int, Mapping[str, Any]] | None = None
) -> list[DagRank]:
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
    bars = {
        step_id: FanOutBar(f["received"], f["expected"], f["failed"], f["missing"], f["state"])
        for step_id, f in (fan_outs or {}).items()
    }
    last = len(ranks) - 1
    laid = [
        DagRank(
            [
                DagNode(
                    s.name,
                    s.seq,
                    s.kind,
                    s.status,
                    s.attempts,
                    bars.get(s.id),
                    fallback=s.status == "errored" and i < last,
                )
                for s in r
            ]
        )
        for i, r in enumerate(ranks)
    ]
    return _grouped(laid)
