"""The ids of an instance's trace: a W3C `traceparent` validated, the trace id and root span id
an instance derives from its id (SHA-256, the same on every process), and the SDK id generator
that gives the next span on this thread the ids it was preset to (an instance's root span).

Pure but for `next_ids`, the thread's preset ids, which `ingest.engine.tracing` sets before it
starts a root span. The SDK is imported only inside `id_generator`, when tracing is on.
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
next_ids = threading.local()  # ids the next span takes (the root span's derived ids)


def valid_traceparent(value: str | None) -> str | None:
    """The header if it is a W3C traceparent (version 00, ids not all zero), else None."""
    if not value:
        return None
    found = TRACEPARENT.match(value.strip().lower())
    if not found or set(found.group(1)) == {"0"} or set(found.group(2)) == {"0"}:
        return None
    return found.group(0)


def instance_ids(instance_id: str) -> tuple[int, int]:
    """(trace id, root span id) of an instance: the same on every process, for ever."""
    digest = hashlib.sha256(f"runledger-instance:{instance_id}".encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1


def id_generator() -> Any:
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class InstanceIds(RandomIdGenerator):
        """Random ids, except for an instance's root span: its ids derive from the instance id."""

        def generate_span_id(self) -> int:
            preset = _preset_take("span")
            return super().generate_span_id() if preset is None else preset

        def generate_trace_id(self) -> int:
            preset = _preset_take("trace")
            return super().generate_trace_id() if preset is None else preset

    return InstanceIds()


def _preset_take(which: str) -> int | None:
    """The id this thread's next span was told to take ("span" or "trace"), once; else None."""
    preset = getattr(next_ids, which, None)
    if preset is None:
        return None
    setattr(next_ids, which, None)
    return int(preset)
