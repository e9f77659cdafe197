"""Runledger's durable step engine: Cloudflare Workflows semantics in Python.

    from ingest.engine import Workflow, NonRetryableError, create, get

The instance API and the step objects load lazily, so workflow modules can import this package
while Django is still starting.
"""

from __future__ import annotations

from typing import Any

from ingest.engine.errors import (
    ApprovalError,
    BatchNotConfirmable,
    BatchTooLarge,
    BreakerNotFound,
    BudgetExceeded,
    CheckedRowsChanged,
    ChildWorkflowFailed,
    CircuitOpen,
    DeadLetterError,
    DuplicateWorkflow,
    EngineError,
    FanOutItemMissing,
    InstanceAlreadyExists,
    InstanceFinished,
    InstanceNotFound,
    InvalidDuration,
    InvalidInstanceId,
    InvalidParams,
    InvalidSearchAttributes,
    InvalidSelection,
    InvalidStepConfig,
    InvalidTransition,
    NonDeterministicReplay,
    NonRetryableError,
    PollDeadlineExceeded,
    StepFailed,
    StepLimitExceeded,
    StepResultNotSerializable,
    StepResultTooLarge,
    StepTimeout,
    UnknownStep,
    UnknownWorkflow,
    VersionInUse,
    VersionMismatch,
    VersionRetired,
    WaitForEventTimeout,
    WorkflowTimeout,
)
from ingest.engine.handlers import fan_out_handler
from ingest.engine.results import WorkflowResult
from ingest.engine.workflow import Workflow, WorkflowEvent, get_workflow, workflow_names

__all__ = [
    "ApprovalError", "BatchNotConfirmable", "BatchTooLarge", "BreakerNotFound", "BudgetExceeded", "CheckedRowsChanged", "ChildWorkflowFailed", "CircuitOpen", "DeadLetterError", "DuplicateWorkflow", "EngineError",
    "FanOutItemMissing", "InstanceAlreadyExists", "InstanceFinished", "InstanceHandle", "InstanceNotFound",
    "InvalidDuration", "InvalidInstanceId", "InvalidParams", "InvalidSearchAttributes", "InvalidSelection", "InvalidStepConfig", "InvalidTransition",
    "NonDeterministicReplay", "NonRetryableError", "PollDeadlineExceeded", "SecretKeysMissing", "SecretUnreadable", "SecretsError", "Settled", "StepFailed", "StepLimitExceeded",
    "StepResultNotSerializable",
    "StepResultTooLarge", "StepTimeout", "UnknownStep", "UnknownWorkflow", "VersionInUse", "VersionMismatch", "VersionRetired",
    "WaitForEventTimeout", "Workflow",
    "WorkflowEvent", "WorkflowResult", "WorkflowTimeout", "create", "create_batch", "fan_out_handler", "get",
    "get_workflow", "workflow_names",
]

_LAZY = {"create": "api", "create_batch": "api", "get": "api", "InstanceHandle": "api", "Settled": "runtime.parallel",
         "SecretsError": "secrets", "SecretKeysMissing": "secrets", "SecretUnreadable": "secrets"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"ingest.engine.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'ingest.engine' has no attribute {name!r}")
