"""Costs, as seen from inside a step: record what an attempt spent and settle its reservations;
after a paid call, once per booking even when a lost attempt is run again (runtime/journal.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils.module_loading import import_string

from ingest.engine import clock
from ingest.engine.costs.budgets import ZERO, add_to_budgets, covering_budgets, lock_budgets, roll_period
from ingest.engine.costs.spend import StepSpend
from ingest.engine.models import (
    ApiCost,
    Budget,
    BudgetReservation,
    History,
    HistoryKind,
    ReservationState,
)
from ingest.engine.periods import period_start
from ingest.engine.runtime.journal import fingerprint_of, journal_write_orm
from ingest.engine.sql import budgets as sql_budgets
from ingest.engine.sql import journal as sql_journal
from ingest.engine.sql.base import ByVendor
from ingest.engine.writes import notify


def cost_record(
    *,
    ctx: StepSpend,
    service: str,
    cost: Decimal | None,
    model: str,
    tokens_in: int,
    tokens_cached: int,
    tokens_out: int,
    items: int,
    metadata: dict[str, Any],
    success: bool,
) -> Decimal:
    usage = {"tokens_in": tokens_in, "tokens_cached": tokens_cached, "tokens_out": tokens_out, "items": items}
    journal = ctx._journal
    slot = None if journal is None else journal.cost(fingerprint_of(service, model, cost, usage, success))
    if slot is None:
        return _record(
            ctx=ctx, service=service, cost=cost, model=model, usage=usage, metadata=metadata, success=success
        )
    assert journal is not None
    if slot.replayed:  # a lost run of this attempt booked it: its row stands, none is added
        return Decimal(slot.answer["cost"])
    now = clock.now()
    if cost is None:
        cost = price(service=service, model=model, usage=usage, at=now)
    # The row and its journal entry commit together, or neither does.
    entry = journal.entry(slot, provider=service, answer={"cost": str(cost)})
    _record_row()(
        _Spend(
            ctx=ctx,
            service=service,
            cost=cost,
            model=model,
            usage=usage,
            metadata=metadata,
            success=success,
            now=now,
            journal=entry,
        )
    )
    return cost


def _record(
    *,
    ctx: StepSpend,
    service: str,
    cost: Decimal | None,
    model: str,
    usage: dict[str, int],
    metadata: dict[str, Any],
    success: bool,
) -> Decimal:
    now = clock.now()
    if cost is None:
        cost = price(service=service, model=model, usage=usage, at=now)
    _record_row()(
        _Spend(
            ctx=ctx, service=service, cost=cost, model=model, usage=usage, metadata=metadata, success=success, now=now
        )
    )
    return cost


@dataclass(frozen=True)
class _Spend:
    """One attempt's spend, priced, as both databases' writes of it take it."""

    ctx: StepSpend
    service: str
    cost: Decimal
    model: str
    usage: dict[str, int]
    metadata: dict[str, Any]
    success: bool
    now: datetime
    journal: dict[str, Any] | None = None  # after a paid call, the booking's journal entry (sql/journal.py)


def _record_orm(s: _Spend) -> None:
    ctx = s.ctx
    with transaction.atomic():
        if s.journal is not None:
            journal_write_orm(s.journal)
        row = ApiCost.objects.create(
            service=s.service,
            cost=s.cost,
            instance_id=ctx.instance_id,
            workflow_type=ctx.workflow,
            step_name=ctx.step_label,
            attempt=ctx.attempt,
            success=s.success,
            model=s.model,
            metadata=s.metadata,
            tenant=ctx.tenant,
            created_at=s.now,
            **s.usage,
        )
        notify.history()
        History.objects.create(
            instance_id=ctx.instance_id,
            workflow=ctx.workflow,
            tenant=ctx.tenant,
            kind=HistoryKind.COST_RECORDED,
            step_name=ctx.step_label,
            data=_history_data(s) | {"cost_id": row.id},
            created_at=s.now,
        )
        # Last, so the budget rows (shared by every step of a tenant) stay locked only for
        # their update and the commit.
        _settle(ctx=ctx, service=s.service, cost=s.cost, now=s.now)


def _history_data(s: _Spend) -> dict[str, Any]:
    return {"service": s.service, "cost": str(s.cost), "model": s.model, "attempt": s.ctx.attempt, "success": s.success}


def _settle(*, ctx: StepSpend, service: str, cost: Decimal, now: datetime) -> None:
    """Charge `cost` to every covering budget and settle this attempt's reservations for the
    service: each gives back its hold, also on a budget disabled since (its hold must not leak)."""
    held: dict[int, BudgetReservation] = {}
    if ctx._reservations:
        for r in (
            BudgetReservation.objects.select_for_update()
            .filter(id__in=ctx._reservations, service=service, state=ReservationState.HELD)
            .order_by("id")
        ):
            held[r.budget_id] = r  # one per budget, as reserved
        BudgetReservation.objects.filter(id__in=[r.id for r in held.values()]).update(
            state=ReservationState.SETTLED, actual=cost, settled_at=now
        )
    changes: dict[int, tuple[Decimal, Decimal]] = {}
    for budget in lock_budgets((covering_budgets(ctx, service) & Q(enabled=True)) | Q(id__in=list(held))):
        charged = _covers(budget, ctx, service)
        if charged:
            roll_period(budget, now)
        release = held[budget.id].amount if budget.id in held else ZERO
        changes[budget.id] = (cost if charged else ZERO, -release)
    add_to_budgets(changes, now)
    for r in held.values():
        ctx._reservations.remove(r.id)


def _covers(budget: Budget, ctx: StepSpend, service: str) -> bool:
    """`covering_budgets` for one budget row in memory (enabled ones only)."""
    key = {"tenant": ctx.tenant, "workflow": ctx.workflow, "service": service, "instance": ctx.instance_id}
    return budget.enabled and key.get(budget.scope) == budget.key


def price(*, service: str, model: str, usage: dict[str, int], at: datetime) -> Decimal:
    """Price usage with the project's pricer (settings.RUNLEDGER_PRICER), or 0 without one."""
    path = getattr(settings, "RUNLEDGER_PRICER", "")
    if not path:
        return ZERO
    pricer = import_string(path)
    return Decimal(pricer(service, model, usage, at)).quantize(Decimal("0.000001"))


def _record_postgres(s: _Spend) -> None:
    from psycopg.types.numeric import Int4

    ctx, now = s.ctx, s.now
    row = sql_budgets.cost_record_row(
        {
            "service": s.service,
            "cost": s.cost,
            "iid": ctx.instance_id,
            "workflow": ctx.workflow,
            "label": ctx.step_label,
            "success": s.success,
            "model": s.model,
            "metadata": json.dumps(s.metadata),
            "tenant": ctx.tenant,
            "now": now,
            # Typed: psycopg sends a plain int as int2, int4 or int8 by its size, and each mix of
            # types would be prepared as a statement of its own.
            "attempt": Int4(ctx.attempt),
            **{key: Int4(value) for key, value in s.usage.items()},
            "hdata": json.dumps(_history_data(s)),
            # An array literal: adapting a Python list costs psycopg more than the other parameters.
            "held": "{" + ",".join(str(r) for r in ctx._reservations) + "}",
            "hour": period_start("hour", now),
            "day": period_start("day", now),
            "month": period_start("month", now),
        }
        | (sql_journal.NO_ENTRY if s.journal is None else s.journal)
    )
    notify.history()  # committed already, or at the commit of the transaction it joined
    assert row is not None  # a SELECT without FROM returns one row
    for settled in row[0]:
        ctx._reservations.remove(settled)


_record_row = ByVendor[Callable[[_Spend], None]](postgresql=_record_postgres, sqlite=_record_orm)
