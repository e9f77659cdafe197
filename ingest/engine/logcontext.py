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

import contextvars
from typing import Any

# The context fields, in the order a JSON line shows them.
FIELDS = ("instance", "workflow", "step", "attempt", "tenant", "worker", "trace_id")

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("runledger_log_context", default=None)


def current() -> dict[str, Any]:
    """The bound fields (a copy: callers may not change the binding through it)."""
    return dict(_context.get() or {})


_KNOWN = frozenset(FIELDS)


class bind:  # noqa: N801 - used as the function it was: `with logcontext.bind(...)`
    """Add fields to the log context inside the block; the previous context comes back after.

    A plain context manager, not a generator one: a step attempt binds its step and attempt
    through it, so it is on every step's path (one dict and one contextvar set and reset).
    """

    __slots__ = ("_fields", "_token")

    def __init__(self, **fields: Any) -> None:
        if not _KNOWN.issuperset(fields):
            unknown = set(fields) - _KNOWN
            raise ValueError(f"unknown log context field(s) {sorted(unknown)}; known: {', '.join(FIELDS)}")
        self._fields = fields
        self._token: contextvars.Token[dict[str, Any] | None] | None = None

    def __enter__(self) -> None:
        context = dict(_context.get() or ())
        for key, value in self._fields.items():
            if value is not None:
                context[key] = value
        self._token = _context.set(context)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _context.reset(self._token)
            self._token = None
