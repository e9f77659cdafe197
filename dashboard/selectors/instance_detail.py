"""One instance as the detail page shows it: steps with attempts and costs, waterfall, DAG,
events, lineage, history. Bounded: a run with thousands of steps shows its first and last ones."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Sum
from django.utils import timezone

from dashboard import access
from dashboard.actions import failed_for_good
from dashboard.selectors.history import history_cursor
from dashboard.selectors.run_layout import (
    AxisBreak,
    DagRank,
    TurnBar,
    WaterfallRow,
    dag_ranks,
    waterfall_layout,
)
from dashboard.selectors.run_turns import Turn, turns_of
from dashboard.selectors.step_logs import AttemptLog, attempt_logs
from ingest.engine import fan_out_list, progress_of, step_progress
from ingest.engine.models import (
    ApiCost,
    ApprovalRequest,
    ApprovalState,
    Attempt,
    History,
    HistoryKind,
    Instance,
    PendingEvent,
    Status,
    Step,
    StepStatus,
)

# While an instance is paused (by an operator, or by a budget gate waiting for an approval) the
# step it stopped in keeps the `running` status in the ledger until the instance resumes; the page
# shows it as paused so nothing looks like it is still running.
_STEPS_RUN_WHILE = frozenset({Status.RUNNING, Status.WAITING_FOR_PAUSE})

HISTORY_LIMIT = 300
# A run can ask for thousands of steps (a fan-out over every call of a day). The page shows the
# first and the last STEP_LIMIT // 2 and says how many it left out; costs are summed in the
# database whatever the cap.
STEP_LIMIT = 400
COST_LINE_LIMIT = 2000
TURN_ROWS = 1000  # status changes read for the waterfall's turns: a long polling run has many


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
    copied: bool = False  # a fork's step copied from its origin (it ran there, not here)
    progress: dict[str, Any] | None = None  # the step's latest ctx.progress report
    logs: list[AttemptLog] = field(default_factory=list)  # what its attempts logged, the running one last

    @property
    def live_line(self) -> dict[str, Any] | None:
        """The running attempt's newest line, shown beside the step's name while it runs."""
        running = self.logs[-1] if self.logs and self.logs[-1].running else None
        return running.last if running is not None else None

    @property
    def log_lines(self) -> int:
        return sum(len(a.lines) + a.dropped for a in self.logs)

    @property
    def percent(self) -> int | None:
        p = self.progress
        if not p or not p.get("total"):
            return None
        return max(0, min(100, round(100 * float(p["done"]) / float(p["total"]))))

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
    fork_of: Instance | None
    forks: list[Instance]  # each with its `fork_step`
    parent: Instance | None
    children: list[Instance]


@dataclass(frozen=True)
class InstanceDetail:
    instance: Instance
    steps: list[StepView]
    waterfall: list[WaterfallRow]
    ticks: list[tuple[float, str]]
    breaks: list[AxisBreak]
    turns: list[TurnBar]
    dag: list[DagRank]
    events: list[PendingEvent]
    costs_total: Decimal
    costs_by_service: list[tuple[str, Decimal]]
    lineage: Lineage
    history: list[History]
    history_truncated: bool
    restartable_steps: list[str]
    steps_hidden: int
    can_act: bool
    cursor: int
    approvals: list[ApprovalRequest] = field(default_factory=list)  # pending ones: what would release it
    failed_for_good: Step | None = None  # the errored step a retry would fail again (NonRetryableError)

    @property
    def fan_out_open(self) -> bool:
        """A fan-out still waits for items: the run graph refreshes itself while one does (its
        items' ends are history rows of theirs, not of this instance, so no live event says so)."""
        return any(n.fan_out is not None and n.fan_out.state == "open" for r in self.dag for n in r.nodes)


def _fork_position(instance: Instance, steps: list[Step]) -> int:
    """A fork's steps below this position were copied from its origin (-1: none were)."""
    if not instance.fork_of_id and not instance.fork_step:
        return -1
    name, sep, seq = instance.fork_step.rpartition("#")
    if not sep or not seq.isdigit():  # a label is `name` or `name#2`; a name may hold "#" itself
        name, seq = instance.fork_step, "1"
    at = next((s.position for s in steps if s.name == name and s.seq == int(seq)), None)
    return at if at is not None else max((s.position + 1 for s in steps), default=-1)


def instance_detail(*, user: Any, instance_id: str, now: datetime | None = None) -> InstanceDetail | None:
    now = now or timezone.now()
    # The live cursor first: a change that commits while the page is read (a worker finishing
    # the run) then lies after it and is pushed on connect; read last, it would be skipped and the
    # page would show the state before it until the next change.
    cursor = history_cursor()
    instance = instance_get(user=user, instance_id=instance_id)
    if instance is None:
        return None
    steps, steps_hidden = _steps_capped(instance)
    if instance.status not in _STEPS_RUN_WHILE:
        for s in steps:
            if s.status == StepStatus.RUNNING:
                s.status = Status.PAUSED if instance.status == Status.PAUSED else instance.status
    attempts: dict[int, list[Attempt]] = defaultdict(list)
    for a in Attempt.objects.filter(step_id__in=[s.id for s in steps]).order_by("step_id", "number"):
        attempts[a.step_id].append(a)
    costs: dict[str, list[CostLine]] = defaultdict(list)
    cost_rows = ApiCost.objects.filter(instance=instance)
    by_service: dict[str, Decimal] = {
        r["service"]: r["total"] for r in cost_rows.values("service").annotate(total=Sum("cost")).order_by()
    }
    total = sum(by_service.values(), Decimal("0"))
    shown = {s.name for s in steps}
    for c in cost_rows.filter(step_name__in=shown).order_by("created_at", "id")[:COST_LINE_LIMIT]:
        costs[c.step_name].append(
            CostLine(
                c.step_name,
                c.attempt,
                c.service,
                c.model,
                c.cost,
                c.success,
                c.tokens_in,
                c.tokens_out,
                c.items,
                c.created_at,
            )
        )
    copied_below = _fork_position(instance, steps)
    progress = step_progress(instance_id=instance.id)
    views = [
        StepView(
            s,
            attempts.get(s.id, []),
            costs.get(s.name, []) if s.seq == 1 else [],
            copied=s.position < copied_below,
            progress=_progress(progress_of(progress, s.name, s.seq), sensitive=s.sensitive),
            logs=attempt_logs(s, attempts.get(s.id, [])),
        )
        for s in steps
    ]
    laid = waterfall_layout(
        [(v.step, v.attempts) for v in views],
        start=instance.started_at or instance.created_at,
        now=now,
        turns=instance_turns(instance),
    )
    # Progress reports show on their step's row, not as a line each in the history.
    # ...and so do the writes of a running step's lines.
    history_qs = (
        History.objects.filter(instance=instance)
        .exclude(kind__in=(HistoryKind.STEP_PROGRESS, HistoryKind.STEP_LOG))
        .order_by("-id")
    )
    history = list(history_qs[: HISTORY_LIMIT + 1])
    truncated = len(history) > HISTORY_LIMIT
    history = list(reversed(history[:HISTORY_LIMIT]))
    tenants = access.tenants_for(user)
    visible = Instance.objects.filter(tenant__in=tenants).only("id", "workflow", "status", "created_at", "tenant")
    lineage = Lineage(
        replay_of=visible.filter(id=instance.replay_of_id).first() if instance.replay_of_id else None,
        replays=list(visible.filter(replay_of=instance).order_by("created_at")[:50]),
        fork_of=visible.filter(id=instance.fork_of_id).first() if instance.fork_of_id else None,
        forks=list(
            visible.filter(fork_of=instance)
            .only("id", "workflow", "status", "created_at", "tenant", "fork_step")
            .order_by("created_at")[:50]
        ),
        parent=visible.filter(id=instance.parent_id).first() if instance.parent_id else None,
        children=list(visible.filter(parent=instance).order_by("created_at")[:100]),
    )
    restartable = list(dict.fromkeys(s.name for s in steps if s.kind == "do"))
    if steps_hidden:
        restartable = list(
            dict.fromkeys(
                Step.objects.filter(instance=instance, kind="do").order_by("position").values_list("name", flat=True)
            )
        )
    return InstanceDetail(
        instance=instance,
        steps=views,
        waterfall=laid.rows,
        ticks=laid.ticks,
        breaks=laid.breaks,
        turns=laid.turns,
        dag=dag_ranks(
            [v.step for v in views if v.step.kind != "rollback"], now=now, fan_outs=_fan_outs(instance, views)
        ),
        events=list(PendingEvent.objects.filter(instance=instance).order_by("id")[:200]),
        costs_total=total,
        costs_by_service=sorted(by_service.items(), key=lambda kv: kv[1], reverse=True),
        lineage=lineage,
        history=history,
        history_truncated=truncated,
        restartable_steps=restartable,
        steps_hidden=steps_hidden,
        can_act=access.can_act(user, instance.tenant),
        cursor=cursor,
        approvals=list(
            ApprovalRequest.objects.filter(instance=instance, state=ApprovalState.PENDING).order_by("created_at")[:5]
        ),
        failed_for_good=instance_failed_for_good(instance, steps) if instance.status == Status.ERRORED else None,
    )


def _progress(report: dict[str, Any] | None, *, sensitive: bool) -> dict[str, Any] | None:
    if report is None or not sensitive:
        return report
    return {**report, "message": ""}  # a sensitive step shows how far it got, not its words


def instance_failed_for_good(instance: Instance, steps: list[Step] | None = None) -> Step | None:
    """The errored step of an errored instance that a retry would run into again unchanged."""
    candidates = steps if steps is not None else list(instance.steps.filter(status=StepStatus.ERRORED))
    for s in candidates:
        if failed_for_good(status=s.status, error_name=s.error_name, attempts=s.attempts, config=s.config):
            return s
    return None


def _fan_outs(instance: Instance, views: list[StepView]) -> dict[int, dict[str, Any]]:
    """The run's fan-outs by step id, when it has any (one query otherwise none)."""
    if not any(v.step.kind == "fan_out" for v in views):
        return {}
    return {f["step_id"]: f for f in fan_out_list(instance_id=instance.id)}


def _steps_capped(instance: Instance) -> tuple[list[Step], int]:
    """The run's steps in order, or its first and last STEP_LIMIT // 2 and how many are left out."""
    qs = Step.objects.filter(instance=instance)
    head = list(qs.order_by("position", "id")[: STEP_LIMIT + 1])
    if len(head) <= STEP_LIMIT:
        return head, 0
    half = STEP_LIMIT // 2
    tail = list(qs.order_by("-position", "-id")[:half])[::-1]
    hidden = qs.count() - half - len(tail)
    first = head[:half]
    keep = {s.id for s in first}
    return first + [s for s in tail if s.id not in keep], max(hidden, 0)


def instance_turns(instance: Instance) -> list[Turn]:
    """The run's turns (run_turns.py) from its last TURN_ROWS status changes."""
    rows = list(
        History.objects.filter(instance=instance, kind=HistoryKind.INSTANCE_STATUS)
        .order_by("-id")
        .values_list("created_at", "status", "data")[:TURN_ROWS]
    )
    return turns_of(reversed(rows))


def instance_ingress_traceparent(*, instance_id: str) -> str | None:
    """The traceparent of the ingress request that created the instance, as its creation kept it."""
    data = (
        History.objects.filter(instance_id=instance_id, kind=HistoryKind.INSTANCE_CREATED)
        .values_list("data", flat=True)
        .first()
    ) or {}
    value = data.get("traceparent")
    return value if isinstance(value, str) else None
