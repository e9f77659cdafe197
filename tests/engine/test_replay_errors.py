"""A replay raises what the first run raised, whatever the exception's constructor; and every
error the engine's public calls raise can be imported from `ingest.engine`."""

from __future__ import annotations

import ast
import inspect
from datetime import timedelta
from pathlib import Path

import pytest

import ingest.engine
from ingest.engine import StepFailed, Workflow, create
from ingest.engine.clock import clock
from ingest.engine.models import Step
from ingest.engine.runtime.failures import failure_of, rebuild_error


class Empty(Exception):
    def __init__(self) -> None:
        super().__init__()


class Declined(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"declined {code}: {reason}")
        self.code, self.reason = code, reason


class Throttled(Exception):
    def __init__(self, *, retry_in: float) -> None:
        super().__init__(f"throttled, retry in {retry_in:g} s")
        self.retry_in = retry_in


class Flagged(Exception):
    """One message, and attributes set after construction."""


class MissingField(KeyError):
    def __init__(self, field: str, *, record: int) -> None:
        super().__init__(field)
        self.record = record


class Outer:
    class Nested(ValueError):
        pass


def _flagged() -> Flagged:
    exc = Flagged("flagged")
    exc.details = {"rows": [1, 2], "source": "gong"}  # type: ignore[attr-defined]
    exc.handle = object()  # not JSON: left out, the rest survives  # type: ignore[attr-defined]
    return exc


SHAPES = {
    "no-arg": Empty,
    "two-arg": lambda: Declined(402, "card declined"),
    "keyword-only": lambda: Throttled(retry_in=2.5),
    "attributes-set-later": _flagged,
    "builtin-subclass": lambda: MissingField("email", record=7),
    "plain-keyerror": lambda: KeyError("k"),
    "nested-class": lambda: Outer.Nested("bad value"),
}


def _same(a: BaseException, b: BaseException) -> None:
    assert type(a) is type(b)
    assert a.args == b.args and str(a) == str(b)
    public = {k: v for k, v in vars(a).items() if k != "handle"}
    assert {k: v for k, v in vars(b).items()} == public


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_stored_failure_is_rebuilt_as_its_own_class_with_its_own_state(shape):
    original = SHAPES[shape]()
    failure = failure_of(original)
    _same(original, rebuild_error(failure.name, failure.message, failure.state))


def test_a_failure_whose_class_cannot_be_imported_comes_back_as_step_failed_naming_it():
    def make():
        class Vanished(Exception):
            def __init__(self, a: int, b: int) -> None:
                super().__init__(a, b)

        return Vanished(1, 2)

    failure = failure_of(make())
    assert failure.name.endswith("make.<locals>.Vanished")
    rebuilt = rebuild_error(failure.name, failure.message, failure.state)
    assert isinstance(rebuilt, StepFailed)
    assert rebuilt.error_name == failure.name and "Vanished" in str(rebuilt)


def test_rows_written_before_the_state_was_kept_still_rebuild_one_message_exceptions():
    rebuilt = rebuild_error("ValueError", "bad", None)
    assert type(rebuilt) is ValueError and rebuilt.args == ("bad",)
    rebuilt = rebuild_error(f"{__name__}.Declined", "declined 1: x", None)
    assert type(rebuilt) is Declined and rebuilt.args == ("declined 1: x",)


# ---- the bug as a workflow saw it: the path after a sleep ----------------------------------

SEEN: list[dict[str, object]] = []


def _describe(exc: BaseException) -> dict[str, object]:
    return {
        "type": type(exc).__name__,
        "args": [str(a) for a in exc.args],
        "attrs": sorted(k for k in vars(exc) if k != "handle"),
    }


class CatchesThenSleeps(Workflow):
    name = "t-catches-then-sleeps"

    def run(self, event, step):
        shape = event.payload["shape"]

        def fail(ctx):
            raise SHAPES[shape]()

        try:
            step.do("charge", fail, retries={"limit": 0})
        except (Empty, Declined, Throttled, Flagged, KeyError, Outer.Nested) as exc:
            SEEN.append(_describe(exc))
            path = "handled"
        except Exception as exc:  # noqa: BLE001 - the bug's path: StepFailed
            SEEN.append(_describe(exc))
            path = "other"
        step.sleep("cool-down", "1 minute")
        return path


@pytest.mark.django_db
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_after_a_sleep_the_replay_takes_the_same_except_branch_as_the_first_turn(drain, shape):
    SEEN.clear()
    h = create("t-catches-then-sleeps", id=f"replay-{shape}", params={"shape": shape})
    drain()
    clock.advance(timedelta(minutes=2))
    drain()
    assert h.status()["status"] == "complete" and h.status()["output"] == "handled"
    assert len(SEEN) == 2 and SEEN[0] == SEEN[1]
    assert Step.objects.get(instance_id=h.id, name="charge").attempts == 1  # replayed, not re-run


class RaisesVanished(Workflow):
    name = "t-raises-vanished"

    def run(self, event, step):
        class Vanished(Exception):
            def __init__(self, code: int) -> None:
                super().__init__(f"code {code}")

        def fail(ctx):
            raise Vanished(3)

        try:
            step.do("call", fail, retries={"limit": 0})
        except Exception as exc:  # noqa: BLE001
            SEEN.append({"type": type(exc).__name__, "name": getattr(exc, "error_name", "")})
        step.sleep("nap", "1 minute")
        return SEEN[-1]


@pytest.mark.django_db
def test_a_replayed_failure_whose_class_is_gone_is_step_failed_with_the_class_named(drain):
    SEEN.clear()
    h = create("t-raises-vanished", id="replay-vanished")
    drain()
    clock.advance(timedelta(minutes=2))
    drain()
    out = h.status()["output"]
    assert out["type"] == "StepFailed" and out["name"].endswith("RaisesVanished.run.<locals>.Vanished")
    assert SEEN[0]["type"] == "Vanished"


# ---- the facade exports every error a public call raises -----------------------------------

ENGINE = Path(ingest.engine.__file__).parent


def _raised_names() -> set[str]:
    """The names in `raise Name(...)` / `raise Name` across the engine's modules."""
    names: set[str] = set()
    for path in ENGINE.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(target, ast.Name):
                    names.add(target.id)
    return names


def test_every_engine_error_a_public_call_can_raise_is_exported_from_the_facade():
    from ingest.engine import errors

    engine_errors = {
        name
        for name, cls in vars(errors).items()
        if inspect.isclass(cls) and issubclass(cls, Exception) and cls.__module__ == errors.__name__
    }
    raised = _raised_names() & engine_errors
    assert {"BatchTooLarge", "InvalidParams", "StepTimeout"} <= raised  # the walk finds them
    missing = sorted(n for n in engine_errors if n not in ingest.engine.__all__ or not hasattr(ingest.engine, n))
    assert missing == []


def test_the_facade_exports_every_exception_class_raised_anywhere_in_the_engine():
    defined: dict[str, list[str]] = {}  # engine classes and their bases' names
    for path in ENGINE.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                defined[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]
    # Signals that unwind `run` (Suspend, LeaseLost, ...) derive from BaseException: user code
    # never sees them, so they are not part of the API.
    signals = {name for name, bases in defined.items() if "BaseException" in bases}
    user_visible = (_raised_names() & set(defined)) - signals
    assert {"InstanceNotFound", "UnknownWorkflow", "BudgetExceeded"} <= user_visible
    assert sorted(n for n in user_visible if not hasattr(ingest.engine, n)) == []
