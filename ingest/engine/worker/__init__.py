"""The worker: claim runnable instances under a lease and run a turn of each (turns.py), in a
pool of threads with a heartbeat (loop.py), and its own PostgreSQL session that ties its leases
to its life and wakes it up (liveness.py)."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

# Names that lived in ingest/engine/worker.py before the worker became this package: their old
# spelling still imports, with a DeprecationWarning, for one release (docs/engine-contract.md,
# "Moved names").
MOVED = {"run_until_idle": "ingest.engine.worker.turns", "Worker": "ingest.engine.worker.loop"}


def __getattr__(name: str) -> Any:
    if name in MOVED:
        warnings.warn(
            f"ingest.engine.worker.{name} moved to {MOVED[name]}.{name}; import it from there "
            "(the old name goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(MOVED[name]), name)
    raise AttributeError(f"module 'ingest.engine.worker' has no attribute {name!r}")
