"""What a spend needs of the step it is made in: the budgets (budgets.py), the breach (breaches.py)
and the cost record (record.py) all read it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ingest.engine.runtime.journal import StepJournal


class StepSpend(Protocol):
    """What a spend needs of its step (runtime/context.py's StepContext is one)."""

    instance_id: str
    workflow: str
    tenant: str
    step_label: str
    attempt: int
    _reservations: list[int]
    _journal: StepJournal | None
