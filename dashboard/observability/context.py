"""The context every log line carries: instance, workflow, step, attempt, tenant, worker, trace.

The contextvar lives in the engine (`ingest.engine.logcontext`: the engine binds it in its worker
turns and step attempts, and may not import the dashboard); this module is the dashboard's name
for it. Two ways in, both read by `logconfig.ContextFilter`:
- `bind(...)` sets the contextvar for the code inside the `with` (threads and asyncio tasks each
  see their own), for the engine, the web side and commands;
- `extra={"instance": ..., "step": ...}` on a single call.
"""

from __future__ import annotations

from ingest.engine import LOG_CONTEXT_FIELDS as FIELDS
from ingest.engine import log_context_bind as bind
from ingest.engine import log_context_current as current

__all__ = ["FIELDS", "bind", "current"]
