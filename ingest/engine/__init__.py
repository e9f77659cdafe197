"""Runledger's durable step engine: Cloudflare Workflows semantics in Python.

    from ingest.engine import Workflow, NonRetryableError, create, get

This package is the engine's surface: code outside `ingest/engine/` imports the engine from here,
from `ingest.engine.services` (the operator services) and from `ingest.engine.models` (the ledger's
tables), never from its other modules (tests/test_architecture.py keeps it so). What needs the
ORM (the instance API, the selectors, the worker) loads lazily, so workflow modules can import
this package while Django is still starting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ingest.engine.breaker import BreakerPolicy
from ingest.engine.clock import now
from ingest.engine.conditions import Lead, RowUnchanged, row_digest_sql
from ingest.engine.durations import parse_duration
from ingest.engine.errors import (
    ApprovalError,
    BatchNotConfirmable,
    BatchTooLarge,
    BreakerNotFound,
    BudgetExceeded,
    CheckedRowsChanged,
    ChildWorkflowFailed,
    CircuitOpen,
    ConcurrencyLimitChanged,
    ConcurrencyLimitNotFound,
    DeadLetterError,
    DuplicateWorkflow,
    EngineError,
    FanOutItemFailed,
    FanOutItemMissing,
    InstanceAlreadyExists,
    InstanceFinished,
    InstanceNotFound,
    InvalidConcurrencyLimit,
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
    error_class_name,
)
from ingest.engine.handlers import fan_out_handler
from ingest.engine.logcontext import FIELDS as LOG_CONTEXT_FIELDS
from ingest.engine.logcontext import bind as log_context_bind
from ingest.engine.logcontext import current as log_context_current
from ingest.engine.periodic import Periodic, as_leader
from ingest.engine.periods import period_start
from ingest.engine.redaction import MASK, redact, redact_value
from ingest.engine.results import WorkflowResult
from ingest.engine.runtime.policy import stored_config_json
from ingest.engine.sql.advisory import session_lock_held, session_lock_try, session_unlock
from ingest.engine.sql.base import ByVendor, aware, is_postgres, prepared_row, prepared_rows
from ingest.engine.tracing import client_span as trace_client_span
from ingest.engine.tracing import continues_ingress as tracing_continues_ingress
from ingest.engine.tracing import ingress_request as trace_ingress_request
from ingest.engine.tracing import is_enabled as tracing_enabled
from ingest.engine.tracing import trace_id_hex
from ingest.engine.workflow import Workflow, WorkflowEvent, get_workflow, workflow_names

if TYPE_CHECKING:  # loaded lazily (below): they need the ORM, or Django's admin and forms
    from ingest.engine.admin import ReadOnly
    from ingest.engine.api import InstanceHandle, create, create_batch, get
    from ingest.engine.costs.budgets import AwaitApproval
    from ingest.engine.retention_runner import RetentionRunner
    from ingest.engine.runtime.context import StepContext
    from ingest.engine.runtime.journal import StepJournal, call_journal_current, fingerprint_of
    from ingest.engine.runtime.parallel import Settled, StepCall
    from ingest.engine.secret_forms import WriteOnlySecretsForm
    from ingest.engine.secrets import (
        REDACTED,
        SecretKeysMissing,
        SecretsError,
        SecretUnreadable,
        configured_keys,
        generate_key,
        lookup_hash,
        lookup_hashes,
        mask,
        public_text,
        public_value,
    )
    from ingest.engine.selectors import fan_out_list, progress_of, step_progress, workflow_versions
    from ingest.engine.step_api import AsyncStepApi, StepApi
    from ingest.engine.worker.loop import Worker

__all__ = [
    "ApprovalError",
    "AsyncStepApi",
    "AwaitApproval",
    "BatchNotConfirmable",
    "BatchTooLarge",
    "BreakerNotFound",
    "BreakerPolicy",
    "BudgetExceeded",
    "ByVendor",
    "CheckedRowsChanged",
    "ChildWorkflowFailed",
    "CircuitOpen",
    "ConcurrencyLimitChanged",
    "ConcurrencyLimitNotFound",
    "DeadLetterError",
    "DuplicateWorkflow",
    "EngineError",
    "FanOutItemFailed",
    "FanOutItemMissing",
    "InstanceAlreadyExists",
    "InstanceFinished",
    "InstanceHandle",
    "InstanceNotFound",
    "InvalidConcurrencyLimit",
    "InvalidDuration",
    "InvalidInstanceId",
    "InvalidParams",
    "InvalidSearchAttributes",
    "InvalidSelection",
    "InvalidStepConfig",
    "InvalidTransition",
    "LOG_CONTEXT_FIELDS",
    "Lead",
    "MASK",
    "NonDeterministicReplay",
    "NonRetryableError",
    "Periodic",
    "PollDeadlineExceeded",
    "REDACTED",
    "ReadOnly",
    "RetentionRunner",
    "RowUnchanged",
    "SecretKeysMissing",
    "SecretUnreadable",
    "SecretsError",
    "Settled",
    "StepApi",
    "StepCall",
    "StepContext",
    "StepFailed",
    "StepJournal",
    "StepLimitExceeded",
    "StepResultNotSerializable",
    "StepResultTooLarge",
    "StepTimeout",
    "UnknownStep",
    "UnknownWorkflow",
    "VersionInUse",
    "VersionMismatch",
    "VersionRetired",
    "WaitForEventTimeout",
    "Worker",
    "Workflow",
    "WorkflowEvent",
    "WorkflowResult",
    "WorkflowTimeout",
    "WriteOnlySecretsForm",
    "as_leader",
    "aware",
    "call_journal_current",
    "configured_keys",
    "create",
    "create_batch",
    "error_class_name",
    "fan_out_handler",
    "fan_out_list",
    "fingerprint_of",
    "generate_key",
    "get",
    "get_workflow",
    "is_postgres",
    "log_context_bind",
    "log_context_current",
    "lookup_hash",
    "lookup_hashes",
    "mask",
    "now",
    "parse_duration",
    "period_start",
    "prepared_row",
    "prepared_rows",
    "progress_of",
    "public_text",
    "public_value",
    "redact",
    "redact_value",
    "row_digest_sql",
    "session_lock_held",
    "session_lock_try",
    "session_unlock",
    "step_progress",
    "stored_config_json",
    "trace_client_span",
    "trace_id_hex",
    "trace_ingress_request",
    "tracing_continues_ingress",
    "tracing_enabled",
    "workflow_names",
    "workflow_versions",
]

_LAZY = {
    "create": "api",
    "create_batch": "api",
    "get": "api",
    "InstanceHandle": "api",
    "Settled": "runtime.parallel",
    "SecretsError": "secrets",
    "SecretKeysMissing": "secrets",
    "SecretUnreadable": "secrets",
    "REDACTED": "secrets",
    "configured_keys": "secrets",
    "generate_key": "secrets",
    "lookup_hash": "secrets",
    "lookup_hashes": "secrets",
    "mask": "secrets",
    "public_text": "secrets",
    "public_value": "secrets",
    "WriteOnlySecretsForm": "secret_forms",
    "ReadOnly": "admin",
    "AwaitApproval": "costs.budgets",
    "RetentionRunner": "retention_runner",
    "Worker": "worker.loop",
    "StepJournal": "runtime.journal",
    "call_journal_current": "runtime.journal",
    "fingerprint_of": "runtime.journal",
    "fan_out_list": "selectors",
    "progress_of": "selectors",
    "step_progress": "selectors",
    "workflow_versions": "selectors",
    "StepApi": "step_api",
    "AsyncStepApi": "step_api",
    "StepCall": "runtime.parallel",
    "StepContext": "runtime.context",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"ingest.engine.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'ingest.engine' has no attribute {name!r}")
