"""The context every log line carries: instance, workflow, step, attempt, tenant, worker, trace id.

A contextvar, so each thread and asyncio task sees its own: the worker binds its id on its
threads, a turn binds its instance (workflow, tenant, trace id) and a step attempt its step and
attempt number, and every line logged inside them (by the engine, a workflow, a source client)
carries them. The dashboard's logging filter (dashboard/observability/logconfig.py) copies them
onto each record; the engine knows nothing of formats or handlers.

Threads do not inherit contextvars: code that hands work to another thread passes `current()`
along and binds it there (runtime/parallel.py).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

# The context fields, in the order a JSON line shows them.
FIELDS = ("instance", "workflow", "step", "attempt", "tenant", "worker", "trace_id")

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "runledger_log_context", default=None)


def current() -> dict[str, Any]:
    """The bound fields (a copy: callers may not change the binding through it)."""
    return dict(_context.get() or {})


@contextlib.contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Add fields to the log context inside the block; the previous context comes back after."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown log context field(s) {sorted(unknown)}; known: {', '.join(FIELDS)}")
    token = _context.set({**(_context.get() or {}), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)
