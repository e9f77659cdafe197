"""Runledger's durable step engine: Cloudflare Workflows semantics in Python.

    from ingest.engine import Workflow, NonRetryableError, create, get

The instance API and the step objects load lazily, so workflow modules can import this package
while Django is still starting.
"""

from __future__ import annotations

from typing import Any

from ingest.engine.errors import (
    BudgetExceeded,
    ChildWorkflowFailed,
    EngineError,
    InstanceAlreadyExists,
    InstanceFinished,
    InstanceNotFound,
    InvalidDuration,
    InvalidInstanceId,
    InvalidParams,
    InvalidStepConfig,
    InvalidTransition,
    NonDeterministicReplay,
    NonRetryableError,
    StepResultNotSerializable,
    StepResultTooLarge,
    StepTimeout,
    UnknownStep,
    UnknownWorkflow,
    WaitForEventTimeout,
)
from ingest.engine.workflow import Workflow, WorkflowEvent, get_workflow, workflow_names

__all__ = [
    "BudgetExceeded", "ChildWorkflowFailed", "EngineError", "InstanceAlreadyExists", "InstanceFinished",
    "InstanceHandle", "InstanceNotFound", "InvalidDuration", "InvalidInstanceId", "InvalidParams",
    "InvalidStepConfig", "InvalidTransition", "NonDeterministicReplay", "NonRetryableError", "Settled",
    "StepResultNotSerializable", "StepResultTooLarge", "StepTimeout", "UnknownStep", "UnknownWorkflow",
    "WaitForEventTimeout", "Workflow", "WorkflowEvent", "create", "create_batch", "get", "get_workflow",
    "workflow_names",
]

_LAZY = {"create": "api", "create_batch": "api", "get": "api", "InstanceHandle": "api", "Settled": "runtime.parallel"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"ingest.engine.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'ingest.engine' has no attribute {name!r}")
