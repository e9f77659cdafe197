"""The run ledger: every table the engine owns. The single source of truth for the dashboard.

Writes go through the services (`ingest.engine.services`) and the worker; nothing else updates these rows.
Django loads an app's models from `<app>.models`, so this package gathers its modules' tables.
"""

from __future__ import annotations

from ingest.engine.models.attributes import InstanceAttributes, InstanceAttributeValue
from ingest.engine.models.batches import Batch, BatchItem, BatchItemState, BatchState
from ingest.engine.models.breakers import BreakerState, BreakerTransition, CircuitBreaker
from ingest.engine.models.costs import (
    ApiCost,
    ApprovalKind,
    ApprovalRequest,
    ApprovalState,
    BreachPolicy,
    Budget,
    BudgetGrant,
    BudgetPeriod,
    BudgetReservation,
    BudgetScope,
    ReservationState,
)
from ingest.engine.models.fan_out import FanOut, FanOutItem, FanOutItemState, FanOutState
from ingest.engine.models.history import (
    PARKED_KINDS,
    DeadLetter,
    DeadLetterState,
    History,
    HistoryKind,
    InstanceSearch,
    PendingEvent,
)
from ingest.engine.models.instances import (
    FINISHED_STATUSES,
    UNFINISHED_STATUSES,
    Attempt,
    AttemptWait,
    Control,
    Instance,
    Status,
    Step,
    StepKind,
    StepStatus,
)
from ingest.engine.models.journal import CallJournal, JournalKind
from ingest.engine.models.limits import ConcurrencyLimit
from ingest.engine.models.retention import RetentionBatch
from ingest.engine.models.versions import RetiredVersion
from ingest.engine.models.workers import WorkerHeartbeat
from ingest.engine.secrets import (
    EncryptedTextField,  # the field the other apps' secrets are stored in
)

__all__ = [
    "EncryptedTextField",
    "BreakerState",
    "CallJournal",
    "ConcurrencyLimit",
    "BreakerTransition",
    "CircuitBreaker",
    "Batch",
    "BatchItem",
    "BatchItemState",
    "BatchState",
    "InstanceAttributes",
    "InstanceAttributeValue",
    "RetentionBatch",
    "FINISHED_STATUSES",
    "UNFINISHED_STATUSES",
    "PARKED_KINDS",
    "ApiCost",
    "AttemptWait",
    "ApprovalKind",
    "ApprovalRequest",
    "ApprovalState",
    "Attempt",
    "BreachPolicy",
    "Budget",
    "BudgetGrant",
    "BudgetPeriod",
    "BudgetReservation",
    "BudgetScope",
    "Control",
    "DeadLetter",
    "DeadLetterState",
    "FanOut",
    "FanOutItem",
    "FanOutItemState",
    "FanOutState",
    "History",
    "HistoryKind",
    "Instance",
    "InstanceSearch",
    "JournalKind",
    "PendingEvent",
    "ReservationState",
    "RetiredVersion",
    "Status",
    "Step",
    "StepKind",
    "StepStatus",
    "WorkerHeartbeat",
]
