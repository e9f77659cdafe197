"""What a step or a turn comes to: the exceptions that unwind a turn (suspend, terminate, fail),
and a result checked and encoded as stored (a failure stored and rebuilt: runtime/failures.py)."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Any

from ingest.engine.errors import (
    EngineError,
    StepResultNotSerializable,
    StepResultTooLarge,
)
from ingest.engine.models import Status
from ingest.engine.runtime.policy import MAX_RESULT_BYTES
from ingest.engine.runtime.records import EngineFault, LeaseLost


class Suspend(BaseException):
    """Unwinds `run` when the instance must wait. Not an Exception: user code won't catch it."""

    def __init__(
        self,
        until: datetime | None,
        *,
        status: str = Status.WAITING,
        event_type: str = "",
        child_id: str = "",
        pause: bool = False,
        fan_out: int = 0,
    ) -> None:
        super().__init__(until)
        self.until, self.status, self.event_type = until, status, event_type
        self.child_id, self.pause, self.fan_out = child_id, pause, fan_out


class Unwind(BaseException):
    """An operator terminated the instance: stop replaying, run rollbacks if asked."""

    def __init__(self, *, rollback: bool) -> None:
        super().__init__(rollback)
        self.rollback = rollback


class FailInstance(BaseException):
    """An engine rule was broken (non-determinism, oversized result): the instance errors."""

    def __init__(self, error: EngineError, *, step: str) -> None:
        super().__init__(str(error))
        self.error, self.step = error, step


CONTROL_FLOW = (Suspend, Unwind, FailInstance, LeaseLost, EngineFault)


class TurnEnd(StrEnum):
    """How a turn ended when it left the instance in no status of its own (otherwise a turn comes
    to the instance's `Status`). A StrEnum: logs and spans show the same words as before."""

    LOST = "lost"  # the lease was lost (terminated, restarted or expired): the turn is dropped
    FAULT = "fault"  # a ledger write failed on the database: the worker retries the turn


def check_result(label: str, instance_id: str, value: Any) -> Any:
    """The value as it will be stored and replayed (JSON round trip); at most 1 MiB."""
    return encode_result(label, instance_id, value)[0]


_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))
_SCALARS = (str, int, bool)  # their JSON round trip gives back the same value


def encode_result(label: str, instance_id: str, value: Any) -> tuple[Any, str]:
    """The value as it will be stored and replayed (JSON round trip), and its JSON; at most 1 MiB."""
    if value is None:
        return None, "null"
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise StepResultNotSerializable(
            f"step {label!r} of instance {instance_id} returned a value that is not "
            f"JSON-serialisable ({exc}); return dicts, lists, strings, numbers, booleans or None"
        ) from None
    size = len(text.encode())
    if size > MAX_RESULT_BYTES:
        raise StepResultTooLarge(
            f"step {label!r} of instance {instance_id} returned {size / 1048576:.1f} MiB; step "
            "results are limited to 1 MiB — store large data in a table and return its id"
        )
    return (value if type(value) in _SCALARS else json.loads(text)), text
