"""The ledger's state right now, for the gauges: each figure one indexed query.

Instance counts, the backlog and the leases read only the unfinished instances (the
`instance_unfinished` partial index, which holds every column they ask for, so PostgreSQL reads
it without visiting the table), dead letters the `deadletter_open` index: none of them grows
with the ledger's finished history, so a scrape stays fast on a big ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Protocol

from django.db.models import Count, F, Func, Min, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Abs, Mod

from dashboard.observability import sql
from dashboard.observability.ingress import hook_labels
from dashboard.observability.models import IngressTally
from ingest.engine import ByVendor, period_start
from ingest.engine.models import (  # as ingest/alerts/checks.py: kept
    UNFINISHED_STATUSES,
    Budget,
    BudgetScope,
    DeadLetter,
    DeadLetterState,
    History,
    HistoryKind,
    Instance,
    Status,
)
from ingest.triggers.models import Route

ACTIVE = UNFINISHED_STATUSES
CLAIM_LOOKBACK = timedelta(hours=1)  # how far back the last claim is looked for


@dataclass(frozen=True)
class Ledger:
    """The gauges' figures. Keys are label values in the metric's label order."""

    active: dict[tuple[str, str], int] = field(default_factory=dict)  # (workflow, status)
    backlog: dict[str, int] = field(default_factory=dict)  # workflow -> runnable now
    oldest_ready_at: datetime | None = None
    sleeping: dict[str, int] = field(default_factory=dict)  # workflow
    waiting_event: dict[str, int] = field(default_factory=dict)  # workflow
    backing_off: dict[str, int] = field(default_factory=dict)  # workflow
    dead_letters: dict[str, int] = field(default_factory=dict)  # workflow
    budgets: dict[tuple[str, str, str], float] = field(default_factory=dict)  # (scope, key, period)
    slots: dict[str, int] = field(default_factory=dict)  # worker -> instances under a live lease
    last_claim_at: datetime | None = None
    ingress: dict[tuple[str, str], int] = field(default_factory=dict)  # (route, status)


def _runnable(now: datetime) -> Q:
    """What a claim would take now: due, no live lease, neither finished nor paused."""
    return (
        Q(status__in=sql.CLAIMABLE_STATUSES)
        & Q(ready_at__lte=now)
        & (Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now))
    )


def budget_ratios(now: datetime) -> dict[tuple[str, str, str], float]:
    """Spent / limit of each enabled budget's current period. Per-instance budgets are left out:
    their key is an instance id, which would make a series per instance."""
    rows = (
        Budget.objects.filter(enabled=True)
        .exclude(scope=BudgetScope.INSTANCE)
        .values_list("scope", "key", "period", "limit", "spent", "period_start")
    )
    return _ratios(rows, now)


def _ratios(
    rows: Iterable[tuple[str, str, str, Decimal, Decimal, datetime]], now: datetime
) -> dict[tuple[str, str, str], float]:
    out: dict[tuple[str, str, str], float] = {}
    for scope, key, period, limit, spent, start in rows:
        # A period that rolled over with no spend since still shows the old `spent`: it is 0 now.
        used = spent if start >= period_start(period, now) else 0
        out[(scope, key, period)] = float(used / limit) if limit > 0 else 0.0
    return out


def ingress_counts(known: set[str]) -> dict[tuple[str, str], int]:
    """Ingress requests by route and status; names that are not a route now count as
    `unknown`, so a caller probing names cannot add series."""
    return _ingress(IngressTally.objects.values_list("route", "status", "n"), known)


def _ingress(rows: Iterable[tuple[str, int, int]], known: set[str]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for route, status, n in rows:
        name = route if route in known or route in hook_labels() else "unknown"
        key = (name, str(status))
        out[key] = out.get(key, 0) + n
    return out


@dataclass(frozen=True)
class InstanceGauges:
    active: dict[tuple[str, str], int]
    backlog: dict[str, int]
    sleeping: dict[str, int]
    waiting: dict[str, int]
    backing_off: dict[str, int]
    oldest_ready_at: datetime | None


# Why a waiting instance waits: the newest of these rows in its history. Read through the
# history_parked index (instance_id, id, with kind; only these rows), newest first: one
# index-only probe, no history page read. The step table has no index on status, and scanning a
# waiting instance's steps for the parked one cost 2.5 s on the 1 M-instance bench (the planner
# chose a sequential scan of 9 M steps).
PARKED_EXACT = 2_000  # waiting instances whose reason is looked up one by one; past it, a sample
PARKED_BY: dict[str, str] = {
    HistoryKind.STEP_SLEEP: "sleep",
    HistoryKind.STEP_WAIT: "event",
    HistoryKind.STEP_RETRY: "retry",
}


def parked_reasons(*, totals: dict[str, int]) -> dict[str, dict[str, int]]:
    """Why the waiting instances wait: {reason: {workflow: count}}.

    Exact while at most PARKED_EXACT instances wait. Past that (PostgreSQL), the reason is looked
    up for a fixed subset of them, every k-th by a hash of the id (so the same instances from one
    scrape to the next), and each workflow's counts are scaled to its waiting total: a probe per
    waiting instance is what costs here (5 µs each), so a scrape stays bounded with 100,000
    sleepers. The estimate's error is a few per cent at worst."""
    reason = Subquery(
        History.objects.filter(instance_id=OuterRef("id"), kind__in=list(PARKED_BY)).order_by("-id").values("kind")[:1]
    )
    qs, step = _probed()(Instance.objects.filter(status=Status.WAITING), sum(totals.values()))
    rows = qs.annotate(reason=reason).values_list("workflow", "reason").annotate(n=Count("id")).order_by()
    return _parked(rows, step=step, totals=totals)


def _sampled(qs: QuerySet[Instance], waiting: int) -> tuple[QuerySet[Instance], int]:
    """PostgreSQL: past PARKED_EXACT waiting, every k-th of them by a hash of the id, and k."""
    if waiting <= PARKED_EXACT:
        return qs, 1
    step = -(-waiting // PARKED_EXACT)
    return qs.annotate(bucket=Mod(Abs(Func(F("id"), function="hashtext")), step)).filter(bucket=0), step


def _every_one(qs: QuerySet[Instance], waiting: int) -> tuple[QuerySet[Instance], int]:
    """SQLite (no hashtext, and a ledger of one machine's size): every waiting instance."""
    return qs, 1


_probed = ByVendor[Callable[[QuerySet[Instance], int], tuple[QuerySet[Instance], int]]](
    postgresql=_sampled, sqlite=_every_one
)


def _parked(
    rows: Iterable[tuple[str, str | None, int]], *, step: int, totals: dict[str, int]
) -> dict[str, dict[str, int]]:
    """The probed waiting instances' reasons, scaled to each workflow's waiting total when only
    every `step`-th was probed."""
    seen: dict[str, int] = {}
    found: dict[str, dict[str, int]] = {"sleep": {}, "event": {}, "retry": {}}
    for w, kind, n in rows:
        seen[w] = seen.get(w, 0) + n
        if kind in PARKED_BY:
            found[PARKED_BY[kind]][w] = n
    if step == 1:
        return found
    return {r: {w: round(n * totals.get(w, 0) / seen[w]) for w, n in per.items()} for r, per in found.items()}


def instance_gauges(*, now: datetime) -> InstanceGauges:
    """Unfinished instances by status (the instance_status index), the runnable ones (the claim
    index) and why the waiting ones wait (their newest parking history row)."""
    active = {
        (w, s): n
        for w, s, n in Instance.objects.filter(status__in=ACTIVE)
        .values_list("workflow", "status")
        .annotate(n=Count("id"))
        .order_by()
    }
    runnable = Instance.objects.filter(_runnable(now))
    backlog = {w: n for w, n in runnable.values_list("workflow").annotate(n=Count("id")).order_by()}
    oldest = runnable.aggregate(m=Min("ready_at"))["m"] if backlog else None
    totals = {w: n for (w, s), n in active.items() if s == Status.WAITING}
    parked = parked_reasons(totals=totals) if totals else {"sleep": {}, "event": {}, "retry": {}}
    return InstanceGauges(active, backlog, parked["sleep"], parked["event"], parked["retry"], oldest)


def ledger_read(*, now: datetime) -> Ledger:
    """The gauges' figures: on PostgreSQL from one statement (sql.py), elsewhere query by query."""
    return _ledger_read()(now=now)


def ledger_read_by_query(*, now: datetime) -> Ledger:
    inst = instance_gauges(now=now)
    dead = {
        w: n
        for w, n in DeadLetter.objects.filter(state=DeadLetterState.OPEN)
        .values_list("workflow")
        .annotate(n=Count("id"))
        .order_by()
    }
    slots = {
        o: n
        for o, n in Instance.objects.filter(status__in=ACTIVE, lease_expires_at__gt=now)
        .exclude(lease_owner="")
        .values_list("lease_owner")
        .annotate(n=Count("id"))
        .order_by()
    }
    claim = (
        History.objects.filter(
            created_at__gte=now - CLAIM_LOOKBACK,
            created_at__lte=now,
            kind=HistoryKind.INSTANCE_STATUS,
            status=Status.RUNNING,
        )
        .order_by("-created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    routes = set(Route.objects.values_list("name", flat=True))
    return Ledger(
        active=inst.active,
        backlog=inst.backlog,
        oldest_ready_at=inst.oldest_ready_at,
        sleeping=inst.sleeping,
        waiting_event=inst.waiting,
        backing_off=inst.backing_off,
        dead_letters=dead,
        budgets=budget_ratios(now),
        slots=slots,
        last_claim_at=claim,
        ingress=ingress_counts(routes),
    )


def ledger_read_one_statement(*, now: datetime) -> Ledger:
    """`ledger_read_by_query`'s figures from one statement (PostgreSQL): one round trip, not a dozen."""
    got = sql.gauges_read(now=now, claim_since=now - CLAIM_LOOKBACK, parked_exact=PARKED_EXACT)
    active = {(w, s): n for w, s, n in got.active}
    totals = {w: n for (w, s), n in active.items() if s == Status.WAITING}
    parked = (
        _parked(got.parked, step=got.parked_step, totals=totals) if totals else {"sleep": {}, "event": {}, "retry": {}}
    )
    budgets = _ratios(
        (
            (scope, key, period, Decimal(limit), Decimal(spent), datetime.fromisoformat(start))
            for scope, key, period, limit, spent, start in got.budgets
        ),
        now,
    )
    return Ledger(
        active=active,
        backlog=dict(got.backlog),
        oldest_ready_at=got.oldest_ready_at,
        sleeping=parked["sleep"],
        waiting_event=parked["event"],
        backing_off=parked["retry"],
        dead_letters=dict(got.dead_letters),
        budgets=budgets,
        slots=dict(got.slots),
        last_claim_at=got.last_claim_at,
        ingress=_ingress(got.ingress, set(got.routes)),
    )


class _LedgerRead(Protocol):
    def __call__(self, *, now: datetime) -> Ledger: ...


_ledger_read = ByVendor[_LedgerRead](postgresql=ledger_read_one_statement, sqlite=ledger_read_by_query)
