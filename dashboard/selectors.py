"""Reads for the runs pages (instances ledger, instance detail) and the live feed.

Every function takes the requesting user and scopes to their tenants; objects of other tenants
are simply absent. Templates get plain data from here and never query.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.db.models import Max, Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.http import QueryDict
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from dashboard import access
from ingest.engine import workflow_names as workflow_names_registered
from ingest.engine.models import (
    ApiCost,
    Attempt,
    History,
    Instance,
    PendingEvent,
    Status,
    Step,
)

PAGE_SIZE = 50
RANGES = {"15m": timedelta(minutes=15), "1h": timedelta(hours=1), "24h": timedelta(hours=24),
          "7d": timedelta(days=7), "30d": timedelta(days=30)}
HISTORY_LIMIT = 300


# ---- the instances ledger ----------------------------------------------------------------


@dataclass(frozen=True)
class InstanceFilters:
    """The list's filters, parsed from and written back to the URL query."""

    workflow: str = ""
    statuses: tuple[str, ...] = ()
    tenant: str = ""
    range: str = ""
    since: datetime | None = None
    until: datetime | None = None
    id_prefix: str = ""
    text: str = ""

    @classmethod
    def from_query(cls, query: QueryDict) -> InstanceFilters:
        statuses = tuple(s for s in query.getlist("status") if s in Status.values)
        rng = query.get("range", "")
        return cls(
            workflow=query.get("workflow", "").strip()[:200],
            statuses=statuses,
            tenant=query.get("tenant", "").strip()[:100],
            range=rng if rng in RANGES else "",
            since=_parse_time(query.get("since", "")),
            until=_parse_time(query.get("until", "")),
            id_prefix=query.get("id", "").strip()[:100],
            text=query.get("q", "").strip()[:200],
        )

    def as_params(self) -> list[tuple[str, str]]:
        pairs: list[tuple[str, str]] = []
        if self.workflow:
            pairs.append(("workflow", self.workflow))
        pairs += [("status", s) for s in self.statuses]
        for key, value in (("tenant", self.tenant), ("range", self.range), ("id", self.id_prefix), ("q", self.text)):
            if value:
                pairs.append((key, value))
        if self.since:
            pairs.append(("since", self.since.strftime("%Y-%m-%dT%H:%M")))
        if self.until:
            pairs.append(("until", self.until.strftime("%Y-%m-%dT%H:%M")))
        return pairs

    def querystring(self) -> str:
        return urlencode(self.as_params())

    @property
    def active(self) -> bool:
        return bool(self.as_params())


def _parse_time(raw: str) -> datetime | None:
    raw = raw.strip()
    if not raw:
        return None
    try:
        value = parse_datetime(raw)
    except ValueError:
        return None
    if value is None:
        return None
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


def _filtered(user: Any, filters: InstanceFilters, *, now: datetime) -> QuerySet[Instance]:
    qs = access.scope(Instance.objects.all(), user)
    if filters.tenant:
        qs = qs.filter(tenant=filters.tenant)
    if filters.workflow:
        qs = qs.filter(workflow=filters.workflow)
    if filters.statuses:
        qs = qs.filter(status__in=filters.statuses)
    if filters.range:
        qs = qs.filter(created_at__gte=now - RANGES[filters.range])
    if filters.since:
        qs = qs.filter(created_at__gte=filters.since)
    if filters.until:
        qs = qs.filter(created_at__lt=filters.until)
    if filters.id_prefix:
        qs = qs.filter(id__startswith=filters.id_prefix)
    if filters.text:
        qs = qs.annotate(params_text=Cast("params", TextField())).filter(params_text__icontains=filters.text)
    return qs


def _older(c: Cursor) -> Q:
    return Q(created_at__lt=c.created_at) | Q(created_at=c.created_at, id__lt=c.id)


def _newer(c: Cursor) -> Q:
    return Q(created_at__gt=c.created_at) | Q(created_at=c.created_at, id__gt=c.id)


def instance_list(
    *, user: Any, filters: InstanceFilters, after: Cursor | None = None,
    before: Cursor | None = None, limit: int = PAGE_SIZE, now: datetime | None = None,
) -> InstancePage:
    """One page of the ledger, newest first, by keyset on (created_at, id): no OFFSET, so page
    1,000 costs what page 1 costs. `after` pages towards older rows, `before` towards newer."""
    now = now or timezone.now()
    qs = _filtered(user, filters, now=now).defer("output", "error_message")
    if before is not None:
        rows = list(qs.filter(_newer(before)).order_by("created_at", "id")[: limit + 1])
        has_newer = len(rows) > limit
        rows = list(reversed(rows[:limit]))
        if not rows:
            return instance_list(user=user, filters=filters, limit=limit, now=now)
        return InstancePage(rows, Cursor.of(rows[-1]), Cursor.of(rows[0]) if has_newer else None,
                            Cursor.of(rows[0]))
    if after is not None:
        qs = qs.filter(_older(after))
    rows = list(qs.order_by("-created_at", "-id")[: limit + 1])
    has_older = len(rows) > limit
    rows = rows[:limit]
    return InstancePage(
        rows=rows,
        next_cursor=Cursor.of(rows[-1]) if has_older and rows else None,
        prev_cursor=Cursor.of(rows[0]) if after is not None and rows else None,
        newest=Cursor.of(rows[0]) if rows else None,
    )


def instance_count_newer(*, user: Any, filters: InstanceFilters, than: Cursor | None, cap: int = 100) -> int:
    """How many rows matching the filters arrived above `than` (capped: the banner says 99+)."""
    qs = _filtered(user, filters, now=timezone.now())
    if than is not None:
        qs = qs.filter(_newer(than))
    return len(qs.order_by().values_list("id", flat=True)[:cap])


def instance_rows(*, user: Any, ids: list[str]) -> list[Instance]:
    """Current state of the given rows (the live feed refreshes the visible rows in place)."""
    return list(access.scope(Instance.objects.filter(id__in=ids), user).defer("output"))


def workflow_names(*, user: Any) -> list[str]:
    """Registered workflow names, for the filter's suggestions (the field accepts any name)."""
    return workflow_names_registered()


# ---- one instance ------------------------------------------------------------------------


def instance_get(*, user: Any, instance_id: str) -> Instance | None:
    return access.scope(Instance.objects.filter(id=instance_id), user).first()


@dataclass(frozen=True)
class CostLine:
    step_name: str
    attempt: int
    service: str
    model: str
    cost: Decimal
    success: bool
    tokens_in: int
    tokens_out: int
    items: int
    created_at: datetime


@dataclass
class StepView:
    step: Step
    attempts: list[Attempt] = field(default_factory=list)
    costs: list[CostLine] = field(default_factory=list)

    @property
    def cost_total(self) -> Decimal:
        return sum((c.cost for c in self.costs), Decimal("0"))

    @property
    def retried(self) -> int:
        return max(0, len(self.attempts) - 1)


@dataclass(frozen=True)
class Lineage:
    replay_of: Instance | None
    replays: list[Instance]
    parent: Instance | None
    children: list[Instance]


@dataclass(frozen=True)
class InstanceDetail:
    instance: Instance
    steps: list[StepView]
    waterfall: list[WaterfallRow]
    ticks: list[tuple[float, str]]
    dag: list[DagRank]
    events: list[PendingEvent]
    costs_total: Decimal
    costs_by_service: list[tuple[str, Decimal]]
    lineage: Lineage
    history: list[History]
    history_truncated: bool
    restartable_steps: list[str]
    can_act: bool
    cursor: int


def instance_detail(*, user: Any, instance_id: str, now: datetime | None = None) -> InstanceDetail | None:
    now = now or timezone.now()
    instance = instance_get(user=user, instance_id=instance_id)
    if instance is None:
        return None
    steps = list(Step.objects.filter(instance=instance).order_by("position", "id"))
    attempts: dict[int, list[Attempt]] = defaultdict(list)
    for a in Attempt.objects.filter(step__instance=instance).order_by("step_id", "number"):
        attempts[a.step_id].append(a)
    costs: dict[str, list[CostLine]] = defaultdict(list)
    total = Decimal("0")
    by_service: dict[str, Decimal] = defaultdict(lambda: Decimal("0"))
    for c in ApiCost.objects.filter(instance=instance).order_by("created_at", "id"):
        line = CostLine(c.step_name, c.attempt, c.service, c.model, c.cost, c.success,
                        c.tokens_in, c.tokens_out, c.items, c.created_at)
        costs[c.step_name].append(line)
        total += c.cost
        by_service[c.service] += c.cost
    views = [StepView(s, attempts.get(s.id, []), costs.get(s.name, []) if s.seq == 1 else []) for s in steps]
    rows, ticks = waterfall(
        [(v.step, v.attempts) for v in views], start=instance.started_at or instance.created_at, now=now
    )
    history_qs = History.objects.filter(instance=instance).order_by("-id")
    history = list(history_qs[: HISTORY_LIMIT + 1])
    truncated = len(history) > HISTORY_LIMIT
    history = list(reversed(history[:HISTORY_LIMIT]))
    tenants = access.tenants_for(user)
    visible = Instance.objects.filter(tenant__in=tenants).only("id", "workflow", "status", "created_at", "tenant")
    lineage = Lineage(
        replay_of=visible.filter(id=instance.replay_of_id).first() if instance.replay_of_id else None,
        replays=list(visible.filter(replay_of=instance).order_by("created_at")[:50]),
        parent=visible.filter(id=instance.parent_id).first() if instance.parent_id else None,
        children=list(visible.filter(parent=instance).order_by("created_at")[:100]),
    )
    seen: set[str] = set()
    restartable = [s.name for s in steps if s.kind == "do" and not (s.name in seen or seen.add(s.name))]
    return InstanceDetail(
        instance=instance,
        steps=views,
        waterfall=rows,
        ticks=ticks,
        dag=dag_ranks([v.step for v in views if v.step.kind != "rollback"], now=now),
        events=list(PendingEvent.objects.filter(instance=instance).order_by("id")[:200]),
        costs_total=total,
        costs_by_service=sorted(by_service.items(), key=lambda kv: kv[1], reverse=True),
        lineage=lineage,
        history=history,
        history_truncated=truncated,
        restartable_steps=restartable,
        can_act=access.can_act(user, instance.tenant),
        cursor=history_cursor(),
    )


# ---- the live feed -----------------------------------------------------------------------


def history_cursor() -> int:
    """The newest history id now: a page rendered now has seen everything up to it."""
    return History.objects.aggregate(m=Max("id"))["m"] or 0


@dataclass(frozen=True)
class Change:
    """What one history row tells the live feed (a TypedDict-free value: consumers use it)."""

    id: int
    instance_id: str | None
    tenant: str
    kind: str
    status: str


def history_changes(
    *, tenants: list[str], instance_id: str | None = None, after: int, limit: int = 5000
) -> list[Change]:
    """History rows after `after` visible to these tenants (or of one instance), ids ascending:
    what a reconnecting browser missed."""
    qs = History.objects.filter(id__gt=after, tenant__in=tenants)
    if instance_id is not None:
        qs = qs.filter(instance_id=instance_id)
    rows = qs.order_by("id").values_list("id", "instance_id", "tenant", "kind", "status")[:limit]
    return [Change(*row) for row in rows]



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
    ticks = [(p, f"+{span * p / 100:.1f}s" if span < 120 else f"+{span * p / 6000:.1f}m") for p in (0, 25, 50, 75, 100)]
    return rows, ticks


@dataclass(frozen=True)
class DagNode:
    name: str
    seq: int
    kind: str
    status: str
    attempts: int


@dataclass(frozen=True)
class DagRank:
    nodes: list[DagNode]


def dag_ranks(steps: list[Step], *, now: datetime) -> list[DagRank]:
    """The run as the steps actually ran: a step that started before every step of the current
    rank ended ran in parallel with them (all_settled fan-out) and joins that rank."""
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
    return [DagRank([DagNode(s.name, s.seq, s.kind, s.status, s.attempts) for s in r]) for r in ranks]
