"""What a step function receives: its identity, its attempt, and the two cost calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ingest.engine import tracing
from ingest.engine.costs import budgets, record
from ingest.engine.runtime import progress as progress_report
from ingest.engine.runtime.journal import StepJournal


@dataclass
class StepContext:
    """Passed to `fn(ctx)` of `step.do`.

    `idempotency_key` is stable across every attempt and every replay of this step (it changes
    only when the instance is restarted), so an outside system can deduplicate our calls. The paid
    clients send it (with the call's ordinal) and journal their answers under it (`_journal`).
    """

    name: str
    count: int
    attempt: int
    config: dict[str, Any]
    idempotency_key: str
    instance_id: str
    workflow: str
    tenant: str
    step_label: str
    _reservations: list[int] = field(default_factory=list, repr=False)
    _journal: StepJournal | None = field(default=None, repr=False)
    _throttle: progress_report.Throttle = field(default_factory=progress_report.Throttle, repr=False)

    def progress(self, done: int | float, total: int | float | None = None, message: str = "") -> bool:
        """Report how far this step has got (`done` of `total`, a short message) to the instance
        page, live, and to the API. Throttled: call it per item if that is simplest; at most one
        report a second is written (the first and the last, done == total, always are). True
        when this one was written."""
        return progress_report.report(
            throttle=self._throttle,
            instance_id=self.instance_id,
            workflow=self.workflow,
            tenant=self.tenant,
            label=self.step_label,
            attempt=self.attempt,
            done=done,
            total=total,
            message=message,
        )

    def check_budget(self, service: str, estimate: Decimal | str | int | float) -> None:
        """Reserve `estimate` against every budget that covers this spend, before spending.

        On a breach the budget's policy decides: `BudgetExceeded` (non-retryable) ends the step,
        or the instance pauses with an approval request an operator can grant or deny.
        """
        self._reservations.extend(budgets.budget_reserve(ctx=self, service=service, amount=_money(estimate)))

    def track_cost(
        self,
        service: str,
        *,
        cost: Decimal | str | int | float | None = None,
        model: str = "",
        tokens_in: int = 0,
        tokens_cached: int = 0,
        tokens_out: int = 0,
        items: int = 0,
        metadata: dict[str, Any] | None = None,
        success: bool = True,
    ) -> Decimal:
        """Record what this attempt spent (an `api_costs` row) and settle its reservation.

        With `cost=None` the usage is priced by `settings.RUNLEDGER_PRICER`. Returns the cost.
        After a paid call the booking is journaled: a retry of a lost attempt that books the same
        again gets the recorded cost back and writes no second row (runtime/journal.py).
        """
        recorded = record.cost_record(
            ctx=self,
            service=service,
            cost=None if cost is None else _money(cost),
            model=model,
            tokens_in=tokens_in,
            tokens_cached=tokens_cached,
            tokens_out=tokens_out,
            items=items,
            metadata=metadata or {},
            success=success,
        )
        if tracing.ENABLED:
            tracing.cost_tracked(recorded)
        return recorded


def _money(value: Decimal | str | int | float) -> Decimal:
    if isinstance(value, float):
        # Floats carry binary noise; go through their shortest repr, then quantize.
        value = repr(value)
    return Decimal(value).quantize(Decimal("0.000001"))
