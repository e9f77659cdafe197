"""Budgets, as seen from inside a step: reserve before spending, give back what was not spent.

A reservation holds money against every budget that covers a spend (tenant, workflow, service,
instance) under a row lock, so concurrent steps cannot overspend a budget together: the check
and the hold happen in one transaction. Recording the real cost (record.py) settles it. On
PostgreSQL each is one prepared statement (sql/budgets.py); SQLite runs the ORM code here,
which does the same writes.

A spend that does not fit is refused one of two ways (`refusal`). Over: what is spent, what
this attempt already holds and the spend together pass the limit, so no settling of other
steps can make room; the budget's policy applies (fail, or ask an operator). Held: it would fit
but for money other steps hold, which they settle (often for less) or give back (a failed
attempt, or a dead worker's once its lease ends): the step waits, `BudgetHeld`, and the engine
tries it again shortly, an attempt that does not count against its retries.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Literal, Protocol

from django.db import transaction
from django.db.models import F, Q

from ingest.engine import clock
from ingest.engine.backoff import Backoff
from ingest.engine.costs.breaches import budget_breach
from ingest.engine.costs.spend import StepSpend
from ingest.engine.models import Budget, BudgetGrant, BudgetReservation, ReservationState, Status
from ingest.engine.periods import period_start
from ingest.engine.sql import budgets as sql_budgets
from ingest.engine.sql.base import ByVendor

ZERO = Decimal("0")


class AwaitApproval(BaseException):
    """Raised inside a step when a budget breach waits for an operator's decision."""


class BudgetHeld(BaseException):
    """Raised inside a step whose spend fits its budgets but for money other steps hold: the
    engine tries the step again after `HOLD_WAIT` (a BaseException, so a step's own `except
    Exception` cannot swallow the wait)."""


# Waits of a step refused for holds: holds of steps in flight settle within a call's time, a
# dead worker's are given back within seconds of its death (liveness) or its lease's end.
HOLD_WAIT = Backoff(first=0.5, cap=5.0)


def refusal(
    *, spent: Decimal, reserved: Decimal, own_held: Decimal, amount: Decimal, limit: Decimal
) -> Literal["over", "held"] | None:
    """Whether a spend of `amount` fits a budget with `limit` (its grant included), `spent` and
    `reserved` (every hold, `own_held` of them this attempt's): None when it fits; "held" when it
    would fit once other steps' holds settle or are given back; "over" when what is spent and
    this attempt's own holds leave it no room, whatever the others do."""
    if spent + reserved + amount <= limit:
        return None
    return "over" if spent + own_held + amount > limit else "held"


def covering_budgets(ctx: StepSpend, service: str) -> Q:
    return (
        Q(scope="tenant", key=ctx.tenant)
        | Q(scope="workflow", key=ctx.workflow)
        | Q(scope="service", key=service)
        | Q(scope="instance", key=ctx.instance_id)
    )


def roll_period(budget: Budget, now: datetime) -> None:
    """Start a new period when the current one is over (spent resets, held money stays held)."""
    start = period_start(budget.period, now)
    if budget.period_start < start:
        budget.period_start = start
        budget.spent = ZERO
        budget.save(update_fields=["period_start", "spent"])


def lock_budgets(budgets: Q) -> list[Budget]:
    """Lock the budgets in id order, the one order every writer of budgets uses, so two
    steps charging the same budgets cannot deadlock."""
    return list(Budget.objects.select_for_update().filter(budgets).order_by("id"))


def add_to_budgets(changes: dict[int, tuple[Decimal, Decimal]], now: datetime) -> None:
    """Add (to spent, to reserved) per locked budget: one UPDATE per distinct pair, which is
    one for all the budgets of a spend (they hold the same amount)."""
    groups: dict[tuple[Decimal, Decimal], list[int]] = {}
    for budget_id, change in changes.items():
        groups.setdefault(change, []).append(budget_id)
    for (spent, reserved), ids in groups.items():
        Budget.objects.filter(id__in=ids).update(
            spent=F("spent") + spent, reserved=F("reserved") + reserved, updated_at=now
        )


def budget_reserve(*, ctx: StepSpend, service: str, amount: Decimal) -> list[int]:
    """Hold `amount` on every covering budget; on a breach apply the budget's policy."""
    return _reserve()(ctx=ctx, service=service, amount=amount)


def _reserve_orm(*, ctx: StepSpend, service: str, amount: Decimal) -> list[int]:
    covering = covering_budgets(ctx, service) & Q(enabled=True)
    # Most spends have no budget, and one plain read says so, where the locking transaction
    # costs three round trips. A budget created after this read is charged when the cost is
    # recorded (`_settle`), exactly as if it had been created a moment after the reservation.
    if not Budget.objects.filter(covering).exists():
        return []
    now = clock.now()
    breached: Budget | None = None
    held_only = False
    ids: list[int] = []
    with transaction.atomic():
        grants = _open_grants(ctx)  # before the lock: only an operator adds them, between attempts
        budgets = lock_budgets(covering)
        for budget in budgets:
            roll_period(budget, now)
        over = [b for b in budgets if b.spent + b.reserved + amount > b.limit + _amount(grants.get(b.id))]
        if over:
            own = _own_holds(ctx)
            really = [
                b
                for b in over
                if refusal(
                    spent=b.spent,
                    reserved=b.reserved,
                    own_held=own.get(b.id, ZERO),
                    amount=amount,
                    limit=b.limit + _amount(grants.get(b.id)),
                )
                == "over"
            ]
            breached, held_only = (really[0], False) if really else (over[0], True)
        elif budgets:
            for budget in budgets:
                _use_grant(budget, grants.get(budget.id))
            add_to_budgets({b.id: (ZERO, amount) for b in budgets}, now)
            held = BudgetReservation.objects.bulk_create(
                [
                    BudgetReservation(
                        budget=budget,
                        instance_id=ctx.instance_id,
                        step_name=ctx.step_label,
                        attempt=ctx.attempt,
                        service=service,
                        amount=amount,
                        created_at=now,
                    )
                    for budget in budgets
                ]
            )
            ids = [r.id for r in held]
    if breached is not None:
        if held_only:
            raise _held(ctx=ctx, service=service, amount=amount, budget=breached)
        # Outside the locking transaction: the breach's history and request must commit even
        # though the step is about to unwind.
        raise AwaitApproval(budget_breach(ctx=ctx, service=service, amount=amount, budget=breached, now=now))
    return ids


def _own_holds(ctx: StepSpend) -> dict[int, Decimal]:
    """What this attempt holds per budget (its earlier `check_budget` calls)."""
    held: dict[int, Decimal] = {}
    if ctx._reservations:
        for budget_id, amount in BudgetReservation.objects.filter(
            id__in=ctx._reservations, state=ReservationState.HELD
        ).values_list("budget_id", "amount"):
            held[budget_id] = held.get(budget_id, ZERO) + amount
    return held


def _held(*, ctx: StepSpend, service: str, amount: Decimal, budget: Budget) -> BudgetHeld:
    return BudgetHeld(
        f"budget {budget.scope}:{budget.key} ({budget.period}) has {budget.limit} with {budget.spent} spent and "
        f"{budget.reserved} held by steps in flight; step {ctx.step_label!r} of instance {ctx.instance_id} asked "
        f"for {amount} on {service}, which fits once those holds are settled or given back: it waits for them"
    )


def _open_grants(ctx: StepSpend) -> dict[int, BudgetGrant]:
    """The instance's unused grant per budget (the first one granted), in one query."""
    grants: dict[int, BudgetGrant] = {}
    for grant in BudgetGrant.objects.filter(instance_id=ctx.instance_id, used=False).order_by("id"):
        grants.setdefault(grant.budget_id, grant)
    return grants


def _amount(grant: BudgetGrant | None) -> Decimal:
    return grant.amount if grant else ZERO


def _use_grant(budget: Budget, grant: BudgetGrant | None) -> None:
    """A grant raises the limit once: the spend it allowed becomes part of the limit. It was
    read before the lock, so it is claimed here with a guarded update: used once at most."""
    if grant is None or budget.spent + budget.reserved <= budget.limit - grant.amount:
        return
    if BudgetGrant.objects.filter(id=grant.id, used=False).update(used=True):
        budget.limit += grant.amount
        Budget.objects.filter(id=budget.id).update(limit=budget.limit)


def reservations_release(*, ids: Iterable[int]) -> None:
    """Give back what an attempt held but did not record (it failed before spending)."""
    ids = list(ids)
    now = clock.now()
    with transaction.atomic():
        held = list(BudgetReservation.objects.select_for_update().filter(id__in=ids, state=ReservationState.HELD))
        if not held:
            return
        by_budget: dict[int, Decimal] = {}
        for r in held:
            by_budget[r.budget_id] = by_budget.get(r.budget_id, ZERO) + r.amount
        lock_budgets(Q(id__in=by_budget))
        add_to_budgets({budget_id: (ZERO, -amount) for budget_id, amount in by_budget.items()}, now)
        BudgetReservation.objects.filter(id__in=[r.id for r in held]).update(
            state=ReservationState.RELEASED, settled_at=now
        )


def reservations_release_orphaned(*, now: datetime) -> int:
    """Give back the money held by attempts that can no longer finish: their instance has ended
    or holds no live lease (the worker died, stalled past its lease, or was fenced off). A living
    attempt always runs under a live lease, which its worker's heartbeat keeps ahead of `now`.
    Returns how many reservations were released."""
    finished = [Status.COMPLETE, Status.ERRORED, Status.TERMINATED]
    with transaction.atomic():
        # SKIP LOCKED: another worker's sweep, or an attempt settling its own, has those rows.
        ids = list(
            BudgetReservation.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(state=ReservationState.HELD)
            .filter(
                Q(instance__isnull=True)
                | Q(instance__lease_token="")
                | Q(instance__lease_expires_at__lt=now)
                | Q(instance__status__in=finished)
            )
            .values_list("id", flat=True)
        )
        if ids:
            reservations_release(ids=ids)
    return len(ids)


def _reserve_postgres(*, ctx: StepSpend, service: str, amount: Decimal) -> list[int]:
    from psycopg.types.numeric import Int4

    now = clock.now()
    row = sql_budgets.budget_reserve_row(
        {
            "tenant": ctx.tenant,
            "workflow": ctx.workflow,
            "service": service,
            "iid": ctx.instance_id,
            "label": ctx.step_label,
            "attempt": Int4(ctx.attempt),
            "amount": amount,
            "now": now,
            "hour": period_start("hour", now),
            "day": period_start("day", now),
            "month": period_start("month", now),
            "own": "{" + ",".join(str(r) for r in ctx._reservations) + "}",
        }
    )
    assert row is not None  # one row: FROM a one-row CTE
    held, breached = list(row[0]), row[1]
    if breached is not None:
        if not row[9]:  # refused only for other steps' holds (`refusal`)
            raise _held(
                ctx=ctx,
                service=service,
                amount=amount,
                budget=Budget(
                    id=breached, scope=row[2], key=row[3], period=row[4], limit=row[5], spent=row[6], reserved=row[7]
                ),
            )
        # Outside the reserving statement: the breach's history and request must commit even
        # though the step is about to unwind.
        budget = Budget(
            id=breached,
            scope=row[2],
            key=row[3],
            period=row[4],
            limit=row[5],
            spent=row[6],
            reserved=row[7],
            policy=row[8],
        )
        raise AwaitApproval(budget_breach(ctx=ctx, service=service, amount=amount, budget=budget, now=now))
    return held


class _Reserve(Protocol):
    def __call__(self, *, ctx: StepSpend, service: str, amount: Decimal) -> list[int]: ...


_reserve = ByVendor[_Reserve](postgresql=_reserve_postgres, sqlite=_reserve_orm)
