"""Durable execution by replay: one worker turn of one instance.

`run(event, step)` executes from the top on every turn. A step whose result is in the ledger
returns it without running; the first step without one runs. A turn ends when `run` returns or
raises (the instance finishes), or when a step must wait (sleep, event, child, retry delay,
pause, drain): then `Suspend` unwinds `run` and the instance is released with a wake-up time,
holding no thread and no memory until then.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import logging
import threading
import traceback
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ingest.engine import clock, flow, lane
from ingest.engine.context import StepContext
from ingest.engine.errors import (
    EngineError,
    NonDeterministicReplay,
    NonRetryableError,
    StepFailed,
    StepResultNotSerializable,
    StepResultTooLarge,
    StepTimeout,
    WorkflowTimeout,
)
from ingest.engine.models import (
    Control,
    History,
    HistoryKind,
    Instance,
    Status,
    StepKind,
    StepStatus,
)
from ingest.engine.policy import (
    MAX_RESULT_BYTES,
    StepConfig,
    check_step_name,
    check_step_options,
    next_delay,
    resolve_config,
)
from ingest.engine.store import (
    EngineFault,
    Failure,
    InstanceStore,
    LeaseLost,
    StepRecord,
    step_label,
)
from ingest.engine.testing_hooks import Overrides, overrides_for
from ingest.engine.watchdog import watchdog
from ingest.engine.workflow import WorkflowEvent, get_workflow

log = logging.getLogger("runledger.engine")

AWAITING_APPROVAL = "AwaitingApproval"
WORKER_LOST = "WorkerLost"
ROLLBACK_POSITION = 1_000_000


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


@dataclass
class Prepared:
    name: str
    seq: int
    position: int
    kind: str
    rec: StepRecord | None
    config: StepConfig | None = None
    sensitive: bool = False
    rollback: Callable[..., Any] | None = None
    deferred: bool = False  # checkpoint="deferred"

    @property
    def label(self) -> str:
        return step_label(self.name, self.seq)


class Execution:
    """One turn of one instance. Holds the replay state; `step` objects call into it."""

    def __init__(self, *, instance: Instance, store: InstanceStore, draining: threading.Event,
                 has_steps: bool = True, ending: Callable[[], None] | None = None) -> None:
        self.instance = instance
        self.store = store
        self.draining = draining
        # Called once the turn has nothing left to run but its last write: the worker claims
        # the instance that takes this slot while that write commits.
        self.ending = ending or _nothing
        self.overrides: Overrides | None = overrides_for(instance.id, instance.workflow)
        records = store.load_steps() if has_steps else []
        self.by_key = {(r.name, r.seq): r for r in records if r.kind != StepKind.ROLLBACK}
        self.by_pos = {r.position: r for r in records if r.kind != StepKind.ROLLBACK}
        self.rollback_done = {r.name for r in records if r.kind == StepKind.ROLLBACK}
        self._counts: dict[str, int] = defaultdict(int)
        self._position = 0
        self._lock = threading.Lock()
        self.rollbacks: list[tuple[int, str, Callable[..., Any], Any]] = []
        self.failed_step = ""
        self.deadline: datetime | None = None  # the workflow-level timeout, set by run_turn

    # ---- identity and replay checks ----------------------------------------------------

    def now(self) -> datetime:
        return clock.now()

    def reserve(self, name: str, kind: str) -> tuple[int, int, StepRecord | None]:
        """Give this call its occurrence and position, and find its record, checking replay order."""
        check_step_name(name)
        with self._lock:
            self._counts[name] += 1
            seq, position = self._counts[name], self._position
            self._position += 1
        rec = self.by_key.get((name, seq))
        at_position = self.by_pos.get(position)
        label = step_label(name, seq)
        if at_position is not None and (at_position.name, at_position.seq) != (name, seq):
            raise FailInstance(NonDeterministicReplay(
                f"instance {self.instance.id}: replay asked for step {label!r} at position "
                f"{position}, but the history has step {step_label(at_position.name, at_position.seq)!r} there; code outside "
                "steps must be deterministic — restart the instance if the workflow changed"
            ), step=label)
        if rec is not None and (rec.position != position or rec.kind != kind):
            raise FailInstance(NonDeterministicReplay(
                f"instance {self.instance.id}: replay asked for {kind} step {label!r} at position "
                f"{position}, but the history recorded it as a {rec.kind} step at position "
                f"{rec.position}; code outside steps must be deterministic"
            ), step=label)
        return seq, position, rec

    def checkpoint(self) -> None:
        """Before new work: honour an operator's terminate or pause, the worker's drain, the timeout."""
        self.check_deadline()
        control = self.store.control
        if control in (Control.TERMINATE, Control.TERMINATE_ROLLBACK):
            raise Unwind(rollback=control == Control.TERMINATE_ROLLBACK)
        if control == Control.PAUSE:
            raise Suspend(self.now(), status=Status.RUNNING, pause=True)
        if self.draining.is_set():
            raise Suspend(self.now(), status=Status.RUNNING)

    # ---- step.do -------------------------------------------------------------------------

    def prepare_do(self, name: str, options: dict[str, Any]) -> Prepared:
        check_step_options(name, options)
        config = resolve_config(name, retries=options.get("retries"), timeout=options.get("timeout"))
        rollback = options.get("rollback")
        if rollback is not None and not callable(rollback):
            from ingest.engine.errors import InvalidStepConfig

            raise InvalidStepConfig(f"rollback of step {name!r} must be callable; got {rollback!r}")
        seq, position, rec = self.reserve(name, StepKind.DO)
        return Prepared(name=name, seq=seq, position=position, kind=StepKind.DO, rec=rec,
                        config=config, sensitive=bool(options.get("sensitive", False)), rollback=rollback,
                        deferred=options.get("checkpoint") == "deferred")

    def memo(self, p: Prepared) -> tuple[bool, Any]:
        """(True, result) for a completed step; raises its stored failure; (False, None) to run."""
        rec = p.rec
        if rec is None:
            return False, None
        if rec.status == StepStatus.COMPLETE:
            self._register_rollback(p, rec.result)
            return True, rec.result
        if rec.status == StepStatus.ERRORED:
            self.failed_step = p.label
            raise rebuild_error(rec.error_name, rec.error_message)
        return False, None

    def start_attempt(self, p: Prepared) -> tuple[StepContext, datetime]:
        if not p.deferred:
            # The barrier: a step that may act outside the database starts only once every
            # earlier step of this instance is durable, so nothing outside depends on a
            # completion a crash could still lose.
            self.store.settle()
        self.checkpoint()
        now = self.now()
        rec = p.rec
        attempt = 1
        if rec is not None:
            if rec.wake_at is not None and rec.wake_at > now:
                raise Suspend(rec.wake_at)  # still backing off before the next attempt
            if rec.status == StepStatus.RUNNING and rec.wake_at is None:
                self._record_lost_attempt(p, now)  # the worker running it died mid-attempt
            attempt = rec.attempts + 1
        assert p.config is not None
        p.rec = self.store.step_started(
            rec=rec, name=p.name, seq=p.seq, position=p.position, kind=p.kind,
            config=p.config.as_json(), attempt=attempt, now=now, sensitive=p.sensitive,
            has_rollback=p.rollback is not None,
        )
        self.by_key[(p.name, p.seq)] = self.by_pos[p.position] = p.rec
        key = f"{self.instance.id}:{p.name}:{p.seq}"
        if self.instance.generation:
            key += f":g{self.instance.generation}"
        ctx = StepContext(
            name=p.name, count=p.seq, attempt=attempt, config=p.config.as_json(), idempotency_key=key,
            instance_id=self.instance.id, workflow=self.instance.workflow,
            tenant=self.instance.tenant, step_label=p.label,
        )
        return ctx, now

    def _record_lost_attempt(self, p: Prepared, now: datetime) -> None:
        assert p.rec is not None
        started = p.rec.started_at or now
        self.store.step_attempt_failed(
            p.rec, attempt=p.rec.attempts, started=started, now=now, retry_at=now,
            failure=Failure(WORKER_LOST, "the worker running this attempt stopped before it "
                            "finished (its lease expired); running the step again"),
        )
        p.rec.wake_at = None

    def invoke(self, fn: Callable[..., Any], ctx: StepContext, p: Prepared) -> Any:
        """Run a step function (sync, or a coroutine function run to completion) with its timeout;
        a deferred step's in the deferred lane (lane.py), which its timeout does not count."""
        mocked, value = self._mocked(p.name)
        if mocked:
            return value
        if p.deferred:
            with lane.deferred_step():
                return self._invoke(fn, ctx, p)
        return self._invoke(fn, ctx, p)

    def _invoke(self, fn: Callable[..., Any], ctx: StepContext, p: Prepared) -> Any:
        assert p.config is not None
        timeout = p.config.timeout.total_seconds()
        if inspect.iscoroutinefunction(fn):
            return asyncio.run(asyncio.wait_for(_call(fn, ctx), timeout))
        arm = watchdog.arm(timeout)
        try:
            try:
                return _call(fn, ctx)
            finally:
                watchdog.disarm(arm)
        except StepTimeout:
            raise StepTimeout(f"step {p.label!r} ran past its timeout of {timeout:g} s") from None

    async def invoke_async(self, fn: Callable[..., Any], ctx: StepContext, p: Prepared) -> Any:
        mocked, value = self._mocked(p.name)
        if mocked:
            return value
        assert p.config is not None
        timeout = p.config.timeout.total_seconds()
        try:
            if inspect.iscoroutinefunction(fn):
                return await asyncio.wait_for(_call(fn, ctx), timeout)
            return await asyncio.to_thread(self.invoke, fn, ctx, p)
        except TimeoutError:
            raise StepTimeout(f"step {p.label!r} ran past its timeout of {timeout:g} s") from None

    def _mocked(self, name: str) -> tuple[bool, Any]:
        if self.overrides is None:
            return False, None
        return self.overrides.take(name)

    def succeeded(self, p: Prepared, ctx: StepContext, started: datetime, result: Any) -> Any:
        self._release(ctx)
        now = self.now()
        try:
            stored, encoded = encode_result(p.label, self.instance.id, result)
        except EngineError as error:
            self.failed_step = p.label
            assert p.rec is not None
            self.store.step_attempt_failed(p.rec, attempt=ctx.attempt, started=started, now=now,
                                           failure=Failure(type(error).__name__, str(error)), retry_at=None)
            raise FailInstance(error, step=p.label) from None
        assert p.rec is not None
        self.store.step_completed(p.rec, attempt=ctx.attempt, started=started, now=now, result=stored,
                                  encoded=encoded, deferred=p.deferred)
        self._register_rollback(p, stored)
        return stored

    def failed(self, p: Prepared, ctx: StepContext, started: datetime, exc: BaseException) -> None:
        """Record a failed attempt; return to retry now, raise Suspend to retry later, or re-raise."""
        self._release(ctx)
        now = self.now()
        assert p.rec is not None and p.config is not None
        failure = failure_of(exc)
        if exc.__class__.__name__ == "AwaitApproval":
            self.store.step_attempt_failed(p.rec, attempt=ctx.attempt, started=started, now=now,
                                           failure=Failure(AWAITING_APPROVAL, str(exc)), retry_at=now)
            raise Suspend(now, status=Status.RUNNING, pause=True) from None
        delay = None
        if not isinstance(exc, NonRetryableError):
            counted = ctx.attempt - self.store.uncounted_attempts(p.rec)
            delay = next_delay(p.config.retries, attempt=counted)
            hint = getattr(exc, "retry_after", None)
            if delay is not None and isinstance(hint, int | float) and hint > delay.total_seconds():
                delay = timedelta(seconds=float(hint))
            if delay is not None and self.overrides is not None and self.overrides.skip_retry_delays:
                delay = timedelta(0)
        retry_at = None if delay is None else now + delay
        self.store.step_attempt_failed(p.rec, attempt=ctx.attempt, started=started, now=now,
                                       failure=failure, retry_at=retry_at)
        if retry_at is None:
            self.failed_step = p.label
            raise exc
        if retry_at > now:
            raise Suspend(retry_at)

    def _release(self, ctx: StepContext) -> None:
        if ctx._reservations:
            from ingest.engine import costs

            costs.reservations_release(ids=ctx._reservations)
            ctx._reservations.clear()

    def _register_rollback(self, p: Prepared, result: Any) -> None:
        if p.rollback is not None:
            with self._lock:
                self.rollbacks.append((p.position, p.label, p.rollback, result))

    # ---- the turn ----------------------------------------------------------------------

    def run_turn(self, make_step: Callable[[Execution, bool], Any]) -> str:
        """Replay `run` once. Returns the status the instance is left in."""
        inst = self.instance
        try:
            workflow = get_workflow(inst.workflow)()
            # Checked at the first new step and at suspension, after replay has registered the
            # completed steps' rollbacks, so a timed-out instance unwinds like any failure.
            self.deadline = _deadline(inst, workflow.__class__._timeout)
            event = WorkflowEvent(payload=inst.params, instance_id=inst.id, timestamp=inst.created_at,
                                  tenant=inst.tenant, workflow=inst.workflow,
                                  schedule=inst.params.get("_schedule") if isinstance(inst.params, dict) else None)
            if workflow.is_async():
                output = asyncio.run(workflow.run(event, make_step(self, True)))
            else:
                output = workflow.run(event, make_step(self, False))
        except Suspend as suspend:
            return self._suspend(suspend)
        except Unwind as unwind:
            return self._terminate(rollback=unwind.rollback)
        except LeaseLost:
            self.store.settle_quietly()
            log.info("instance %s: lease lost (terminated, restarted or expired); dropping the turn", inst.id)
            return "lost"
        except EngineFault as fault:
            self.store.settle_quietly()
            log.error("instance %s: the ledger write failed (%s); the turn is retried when its lease expires",
                      inst.id, fault)
            return "fault"
        except FailInstance as fail:
            self.failed_step = fail.step
            return self._fail(Failure(type(fail.error).__name__, str(fail.error)))
        except Exception as exc:  # noqa: BLE001 - any failure of user code errors the instance
            return self._fail(failure_of(exc))
        if self.store.control == Control.TERMINATE_ROLLBACK:
            return self._terminate(rollback=True)
        try:
            output = check_result("output", inst.id, output)
        except EngineError as error:
            return self._fail(Failure(type(error).__name__, str(error)))
        self.ending()
        self.store.finish(now=self.now(), status=Status.COMPLETE, output=output, parent_id=inst.parent_id)
        return Status.COMPLETE

    def check_deadline(self) -> None:
        """Past the workflow's timeout, the instance errors at this step boundary."""
        error = self._timed_out()
        if error is not None:
            raise FailInstance(error, step="")

    def _timed_out(self) -> WorkflowTimeout | None:
        if not flow.timed_out(deadline=self.deadline, now=self.now()):
            return None
        timeout = get_workflow(self.instance.workflow)._timeout
        assert self.deadline is not None and timeout is not None
        return WorkflowTimeout(workflow=self.instance.workflow, instance_id=self.instance.id,
                               timeout=timeout.total_seconds(),
                               started_at=f"{self.deadline - timeout:%Y-%m-%d %H:%M:%S} UTC")

    def _suspend(self, suspend: Suspend) -> str:
        if self.store.control == Control.TERMINATE_ROLLBACK:
            return self._terminate(rollback=True)
        timed_out = self._timed_out()  # a sleeper woken by its deadline replays to here
        if timed_out is not None:
            return self._fail(Failure(type(timed_out).__name__, str(timed_out)))
        # A sleeper must wake by its deadline to fail, not sleep past it.
        suspend.until = flow.cap_wake(suspend.until, deadline=self.deadline)
        self.ending()
        return self.store.suspend(now=self.now(), ready_at=suspend.until, status=suspend.status,
                                  event_type=suspend.event_type, child_id=suspend.child_id, pause=suspend.pause)

    def _fail(self, failure: Failure) -> str:
        self._run_rollbacks()
        self.ending()
        self.store.finish(now=self.now(), status=Status.ERRORED, failure=failure,
                          failed_step=self.failed_step, parent_id=self.instance.parent_id)
        return Status.ERRORED

    def _terminate(self, *, rollback: bool) -> str:
        if rollback:
            self._run_rollbacks()
        self.ending()
        self.store.finish(now=self.now(), status=Status.TERMINATED, parent_id=self.instance.parent_id)
        return Status.TERMINATED

    def _run_rollbacks(self) -> None:
        """Run registered rollback handlers in reverse order of their steps' start, once each."""
        for position, label, handler, result in sorted(self.rollbacks, key=lambda r: r[0], reverse=True):
            name = f"rollback:{label}"
            if name in self.rollback_done:
                continue
            now = self.now()
            ctx = StepContext(name=name, count=1, attempt=1, config={}, step_label=name,
                              idempotency_key=f"{self.instance.id}:{name}", instance_id=self.instance.id,
                              workflow=self.instance.workflow, tenant=self.instance.tenant)
            try:
                handler(ctx, result) if _arity(handler) >= 2 else handler(ctx)
                failure = None
            except Exception as exc:  # noqa: BLE001 - a failing rollback must not stop the others
                failure = failure_of(exc)
            self.store.rollback_recorded(name=name, position=ROLLBACK_POSITION + position, now=now,
                                         started=now, failure=failure)


def _nothing() -> None:
    pass


def _call(fn: Callable[..., Any], ctx: StepContext) -> Any:
    return fn(ctx) if _arity(fn) >= 1 else fn()


_ARITY: dict[Any, int] = {}


def _arity(fn: Callable[..., Any]) -> int:
    key = getattr(fn, "__code__", None) or fn
    try:
        return _ARITY[key]
    except (KeyError, TypeError):
        pass
    try:
        params = inspect.signature(fn).parameters.values()
        count = sum(1 for prm in params if prm.kind in (prm.POSITIONAL_ONLY, prm.POSITIONAL_OR_KEYWORD, prm.VAR_POSITIONAL))
    except (TypeError, ValueError):
        count = 1
    with contextlib.suppress(TypeError):  # unhashable callables are simply not cached
        _ARITY[key] = count
    return count


def _deadline(inst: Instance, timeout: timedelta | None) -> datetime | None:
    """The instance's deadline: its timeout from its start, or from the operator's last restart
    or retry, which run it again and so start its clock again."""
    if timeout is None or inst.started_at is None:
        return None
    rerun = (History.objects.filter(instance_id=inst.id, kind=HistoryKind.OPERATOR,
                                    data__action__in=["restart", "retry"])
             .order_by("-id").values_list("created_at", flat=True).first())
    return flow.deadline(started_at=max(inst.started_at, rerun or inst.started_at), timeout=timeout)


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


def failure_of(exc: BaseException) -> Failure:
    """The exception as stored: engine and builtin classes by name, others by dotted path."""
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
