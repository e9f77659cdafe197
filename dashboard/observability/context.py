"""The context every log line carries: instance, workflow, step, attempt, tenant, worker, trace.

Two ways in, both read by `logconfig.ContextFilter`:
- `bind(...)` sets a contextvar for the code inside the `with` (threads and asyncio tasks each
  see their own), for the web side and commands;
- `extra={"instance": ..., "step": ...}` on a single call, which needs no import: the engine
  (which may not import the dashboard) can pass its context that way.
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
    token = _context.set({**current(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)
