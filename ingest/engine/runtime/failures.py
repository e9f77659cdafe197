"""A step's failure as the ledger keeps it, and the same exception raised again on replay.

A replay must raise what the first run raised, whatever the exception's constructor: the
workflow's `except Declined as e: ... e.code` must take the same path on every turn. So the
ledger keeps the class's dotted path, the message, and the exception's JSON-safe state (its
`args` and the JSON-safe entries of its `__dict__`), and replay rebuilds the exception without
calling `__init__` (`cls.__new__(cls)`, then that state), as `pickle` does. A class that can no
longer be imported comes back as `StepFailed`, whose `error_name` names it.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import json
import traceback
from typing import Any

from ingest.engine import errors
from ingest.engine.errors import StepFailed, error_class_name, error_name_of
from ingest.engine.runtime.records import Failure
from ingest.engine.secrets import REDACTED, is_sealed, seal, unseal

MAX_STATE_BYTES = 64 * 1024  # beyond this the attributes are dropped; args and message remain


# Set on an exception raised by (or replayed from) a `sensitive=True` step, so the instance's
# error it may become is stored sealed too.
SENSITIVE_MARK = "_runledger_sensitive"


def failure_of(exc: BaseException) -> Failure:
    """The exception as stored: engine and builtin classes by name, others by dotted path;
    sealed when it came from a sensitive step."""
    name = error_name_of(exc)
    message = str(exc) or type(exc).__name__
    trace = "".join(traceback.format_exception(exc))[-20000:]
    if getattr(exc, SENSITIVE_MARK, False):
        return sealed(name, message=message, traceback=trace, state=exception_state(exc))
    # A Failure redacts its texts as it is made (records.Failure).
    return Failure(name=name, message=message, traceback=trace, state=exception_state(exc))


def mark_sensitive(exc: BaseException) -> BaseException:
    with contextlib.suppress(AttributeError, TypeError):
        setattr(exc, SENSITIVE_MARK, True)
    return exc


def sealed(name: str, *, message: str, traceback: str, state: dict[str, Any] | None) -> Failure:
    """A sensitive failure as stored: the message shows "redacted"; the message, the traceback
    and the state (its args repeat the message) are kept encrypted, in clear inside, in the
    traceback column, and replay opens them (`open_failure`)."""
    box = seal(json.dumps({"message": message, "traceback": traceback, "state": state}))
    return Failure(name=name, message=REDACTED, traceback=box, state=None)


def open_failure(message: str, traceback_text: str) -> tuple[str, str, dict[str, Any] | None]:
    """(message, traceback, state) in clear, from the columns `sealed` wrote (or plain ones)."""
    if not is_sealed(traceback_text):
        return message, traceback_text, None
    opened = json.loads(unseal(traceback_text))
    state = opened.get("state")
    return (
        str(opened.get("message", "")),
        str(opened.get("traceback", "")),
        state if isinstance(state, dict) else None,
    )


def exception_state(exc: BaseException) -> dict[str, Any] | None:
    """What rebuilds `exc` without its constructor: its args and attributes that survive JSON.

    Args that do not survive JSON are not kept at all (the rebuilt exception's args are then its
    message); an attribute that does not is left out alone."""
    state: dict[str, Any] = {}
    own = error_class_name(type(exc))
    if error_name_of(exc) != own:
        # Stored under another class's name (NonRetryableError.wrap): replay raises this class.
        state["class"] = own
    args = list(exc.args)
    if _json_safe(args):
        state["args"] = args
    attrs = (
        {k: v for k, v in vars(exc).items() if isinstance(k, str) and _json_safe(v)} if hasattr(exc, "__dict__") else {}
    )
    if attrs:
        state["attrs"] = attrs
    if not state:
        return None
    if len(json.dumps(state)) > MAX_STATE_BYTES:
        state.pop("attrs", None)
        if len(json.dumps(state)) > MAX_STATE_BYTES:
            state.pop("args", None)
            return state or None
    return state


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def rebuild_error(name: str, message: str, state: dict[str, Any] | None = None) -> BaseException:
    """The stored failure as an exception of its original class, with its original state. The
    class is the one the state names when the failure was stored under another name."""
    stored_class = state.get("class") if state else None
    cls = error_class(stored_class if isinstance(stored_class, str) and stored_class else name)
    if cls is None:
        return StepFailed(
            f"{message} (raised as {name}, a class this process cannot import: "
            "deploy it with the workflow, or catch StepFailed)",
            name=name,
        )
    if state is None:
        with contextlib.suppress(Exception):  # the legacy rows: a one-message constructor
            return cls(_unrepr(message) if issubclass(cls, KeyError) else message)
        state = {}
    args = state.get("args")
    if not isinstance(args, list):
        args = [_unrepr(message) if issubclass(cls, KeyError) else message]
    try:
        exc = cls.__new__(cls)
    except Exception:  # noqa: BLE001 - a __new__ that needs arguments: the constructor, then
        try:
            exc = cls(*args)
        except Exception:  # noqa: BLE001
            return StepFailed(f"{message} (raised as {name}, which could not be rebuilt)", name=name)
    exc.args = tuple(args)
    attrs = state.get("attrs")
    if isinstance(attrs, dict):
        with contextlib.suppress(AttributeError, TypeError):
            exc.__dict__.update(attrs)
    return exc


def error_class(name: str) -> type[Exception] | None:
    """The exception class stored under `name`: a builtin or engine error by its name, any other
    by its dotted path (module, then attributes: nested classes resolve too). None if gone."""
    candidates: list[Any] = []
    if "." not in name:
        candidates += [getattr(errors, name, None), getattr(builtins, name, None)]
    else:
        candidates.append(_resolve(name))
    for cls in candidates:
        if isinstance(cls, type) and issubclass(cls, Exception):
            return cls
    return None


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _unrepr(text: str) -> str:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return value if isinstance(value, str) else text
