"""What a step or a turn comes to: the exceptions that unwind a turn (suspend, terminate, fail),
a result checked and encoded as stored, and a failure stored and rebuilt on replay."""

from __future__ import annotations

import contextlib
import importlib
import json
import traceback
from datetime import datetime
from typing import Any

from ingest.engine.errors import (
    EngineError,
    StepFailed,
    StepResultNotSerializable,
    StepResultTooLarge,
)
from ingest.engine.models import Status
from ingest.engine.runtime.policy import MAX_RESULT_BYTES
from ingest.engine.runtime.records import EngineFault, Failure, LeaseLost
from ingest.engine.secrets import REDACTED, is_sealed, seal, unseal


class Suspend(BaseException):
    """Unwinds `run` when the instance must wait. Not an Exception: user code won't catch it."""

    def __init__(self, until: datetime | None, *, status: str = Status.WAITING,
                 event_type: str = "", child_id: str = "", pause: bool = False) -> None:
        super().__init__(until)
        self.until, self.status, self.event_type = until, status, event_type
        self.child_id, self.pause = child_id, pause


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


# Set on an exception raised by (or replayed from) a `sensitive=True` step, so the instance's
# error it may become is stored sealed too.
SENSITIVE_MARK = "_runledger_sensitive"


def mark_sensitive(exc: BaseException) -> BaseException:
    with contextlib.suppress(AttributeError, TypeError):
        setattr(exc, SENSITIVE_MARK, True)
    return exc


def seal_failure(failure: Failure) -> Failure:
    """A sensitive failure as stored: the message shows "redacted", and the message and the
    traceback are kept encrypted in the traceback column (replay opens them: `open_failure`)."""
    sealed = seal(json.dumps({"message": failure.message, "traceback": failure.traceback}))
    return Failure(name=failure.name, message=REDACTED, traceback=sealed)


def open_failure(message: str, traceback_text: str) -> tuple[str, str]:
    """(message, traceback) in clear, from the columns `seal_failure` wrote (or plain ones)."""
    if not is_sealed(traceback_text):
        return message, traceback_text
    opened = json.loads(unseal(traceback_text))
    return str(opened.get("message", "")), str(opened.get("traceback", ""))


def failure_of(exc: BaseException) -> Failure:
    """The exception as stored: engine and builtin classes by name, others by dotted path; sealed
    when it came from a sensitive step."""
    failure = _failure_of(exc)
    return seal_failure(failure) if getattr(exc, SENSITIVE_MARK, False) else failure


def _failure_of(exc: BaseException) -> Failure:
    name = getattr(exc, "error_name", None)
    if not isinstance(name, str) or not name:
        cls = type(exc)
        short = cls.__module__ in ("builtins", "ingest.engine.errors")
        name = cls.__name__ if short else f"{cls.__module__}.{cls.__qualname__}"
    return Failure(name=name, message=str(exc) or type(exc).__name__,
                   traceback="".join(traceback.format_exception(exc))[-20000:])


def _unrepr(text: str) -> str:
    import ast

    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return value if isinstance(value, str) else text


def rebuild_error(name: str, message: str) -> BaseException:
    """The stored failure as an exception again, of its original class where it can be rebuilt."""
    module_name, _, cls_name = name.rpartition(".")
    candidates: list[Any] = []
    if module_name:
        with contextlib.suppress(ImportError, AttributeError):
            candidates.append(getattr(importlib.import_module(module_name), cls_name))
    else:
        import builtins

        from ingest.engine import errors

        candidates += [getattr(errors, name, None), getattr(builtins, name, None)]
    for cls in candidates:
        if isinstance(cls, type) and issubclass(cls, Exception):
            if issubclass(cls, KeyError):
                message = _unrepr(message)  # str(KeyError("k")) is "'k'"
            try:
                return cls(message)
            except Exception:  # noqa: BLE001, S112 - a constructor with other arguments
                continue
    return StepFailed(message, name=name)
