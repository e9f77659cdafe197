"""What the runtime keeps of a step and a turn between the ledger and the replay: a step's record,
a deferred sleep write, a failure as stored, the two ways a turn is abandoned (lease lost, ledger
write failed), and the small helpers every writer of the ledger uses."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

from django.db import DatabaseError

from ingest.engine.models import Instance, Status
from ingest.engine.redaction import redact, redact_value
from ingest.engine.runtime.markers import Marker
from ingest.engine.secrets import is_sealed
from ingest.engine.sql.steps import StepRow

P = ParamSpec("P")
R = TypeVar("R")


class LeaseLost(BaseException):
    """The worker no longer holds the instance (terminated, restarted, or lease expired)."""


class EngineFault(BaseException):
    """The ledger could not be written; the turn is abandoned, and its worker retries it (worker/loop.py).

    A BaseException so that neither user code nor the step's retry logic mistakes a failure of
    the engine's own writes for a failure of the step.
    """


def ledger_io(method: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except DatabaseError as exc:
            raise EngineFault(f"{method.__name__}: {exc}") from exc

    return wrapper


@dataclass
class StepRecord:
    id: int
    name: str
    seq: int
    position: int
    kind: str
    status: str
    result: Any = None
    error_name: str = ""
    error_message: str = ""
    attempts: int = 0
    wake_at: datetime | None = None
    event_type: str = ""
    child_id: str | None = None
    started_at: datetime | None = None
    error_state: dict[str, Any] | None = None  # the final failure's state (runtime/failures.py)
    # A first attempt on PostgreSQL whose row is not written yet (id 0): what to insert, and its
    # start marker (markers.py).
    row: StepRow | None = None
    marker: Marker | None = None


@dataclass(frozen=True)
class SleepWrite:
    """A deferred write of a sleep step: its start ("start": the sleeping row and its history)
    or its end ("end": the row completed)."""

    kind: str
    name: str
    seq: int
    position: int
    at: datetime
    wake_at: datetime | None = None
    step_id: int = 0


@dataclass(frozen=True)
class Failure:
    """A failed attempt as stored: the class's name (dotted unless builtin or the engine's), its
    message, the traceback, and `state` ({"args": [...], "attrs": {...}} or None), from which
    replay rebuilds the exception (runtime/failures.py).

    Every text in it is redacted as it is made (`ingest.engine.redaction`): whatever writes a
    failure to the ledger, and whatever reads it back to a log, an alert or a callback, never
    holds a secret the failed call carried (an API key in a URL, a bearer token, a credential).
    Replay rebuilds the exception from these redacted texts. A sealed traceback (a sensitive
    step's) is left as it is: it is ciphertext."""

    name: str
    message: str
    traceback: str = ""
    state: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", redact(self.message))
        if not is_sealed(self.traceback):
            object.__setattr__(self, "traceback", redact(self.traceback))
        if self.state is not None:
            object.__setattr__(self, "state", redact_value(self.state))


def wake_parent(parent_id: str, *, now: datetime) -> None:
    """A child finished: make its waiting parent runnable now (paused parents wake on resume)."""
    Instance.objects.filter(id=parent_id, status__in=[Status.WAITING, Status.RUNNING]).update(ready_at=now)
    Instance.objects.filter(id=parent_id, status=Status.PAUSED).update(paused_ready_at=now)


def step_label(name: str, seq: int) -> str:
    """How a step is named in the history and on the dashboard: `name`, or `name#2` for its 2nd call."""
    return name if seq == 1 else f"{name}#{seq}"
