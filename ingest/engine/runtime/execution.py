"""Durable execution by replay: one worker turn of one instance, step by step.

`run(event, step)` executes from the top on every turn. A step whose result is in the ledger
returns it without running; the first step without one runs. A turn ends when `run` returns or
raises (the instance finishes), or when a step must wait (sleep, event, child, retry delay,
pause, drain): then `Suspend` unwinds `run` and the instance is released with a wake-up time,
holding no thread and no memory until then.

`Execution` holds a turn's replay state and the life of one `step.do`; its collaborators run the
rest: invoke.py runs the step function, outcomes.py says what a result or a failure is stored
as, turn.py replays `run` and ends the turn, store.py and its siblings write the ledger.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from ingest.engine import clock, flow
from ingest.engine.costs import budgets
from ingest.engine.errors import (
    CircuitOpen,
    EngineError,
    InvalidStepConfig,
    NonDeterministicReplay,
    NonRetryableError,
    StepLimitExceeded,
    VersionMismatch,
    WorkflowTimeout,
)
from ingest.engine.models import AttemptWait, Control, Instance, Status, StepKind, StepStatus
from ingest.engine.runtime import steplog
from ingest.engine.runtime.context import StepContext
from ingest.engine.runtime.failures import failure_of, mark_sensitive, open_failure, rebuild_error
from ingest.engine.runtime.journal import StepJournal, journal_adopt
from ingest.engine.runtime.outcomes import (
    FailInstance,
    Suspend,
    Unwind,
    encode_result,
)
from ingest.engine.runtime.policy import (
    StepConfig,
    check_step_name,
    check_step_options,
    next_delay,
    resolve_config,
)
from ingest.engine.runtime.records import Failure, StepRecord, step_label
from ingest.engine.runtime.store import InstanceStore
from ingest.engine.secrets import REDACTED, seal_value, unseal_value
from ingest.engine.testing_hooks import Overrides, overrides_for
from ingest.engine.workflow import get_workflow

log = logging.getLogger("runledger.engine")

# What an attempt that waited rather than failed is stored under (plain strings, as failures' names are).
AWAITING_APPROVAL = AttemptWait.AWAITING_APPROVAL.value
BUDGET_HELD = AttemptWait.BUDGET_HELD.value
CIRCUIT_OPEN = AttemptWait.CIRCUIT_OPEN.value
WORKER_LOST = "WorkerLost"
ROLLBACK_POSITION = 1_000_000
DEFAULT_MAX_STEPS = 10_000  # RUNLEDGER_MAX_STEPS when the settings do not say


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

    @functools.cached_property
    def label(self) -> str:  # asked several times per step; name and seq never change
        return step_label(self.name, self.seq)


class Execution:
    """One turn of one instance. Holds the replay state; `step` objects call into it."""

    def __init__(
        self,
        *,
        instance: Instance,
        store: InstanceStore,
        draining: threading.Event,
        has_steps: bool = True,
        ending: Callable[[], None] | None = None,
    ) -> None:
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
        # Every step call counts (do, sleep, wait, child): a runaway loop stops here.
        self.max_steps = int(getattr(settings, "RUNLEDGER_MAX_STEPS", DEFAULT_MAX_STEPS))
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
        if position >= self.max_steps:
            raise FailInstance(
                StepLimitExceeded(
                    f"instance {self.instance.id} asked for step {step_label(name, seq)!r} past its cap of "
                    f"{self.max_steps:,} steps (RUNLEDGER_MAX_STEPS); split the work into child workflows, "
                    "or raise RUNLEDGER_MAX_STEPS if the workflow really needs more"
                ),
                step=step_label(name, seq),
            )
        rec = self.by_key.get((name, seq))
        at_position = self.by_pos.get(position)
        if at_position is not None and (at_position.name, at_position.seq) != (name, seq):
            label = step_label(name, seq)
            raise FailInstance(
                self.replay_mismatch(
                    f"instance {self.instance.id}: replay asked for step {label!r} at position "
                    f"{position}, but the history has step {step_label(at_position.name, at_position.seq)!r} there"
                ),
                step=label,
            )
        if rec is not None and (rec.position != position or rec.kind != kind):
            label = step_label(name, seq)
            raise FailInstance(
                self.replay_mismatch(
                    f"instance {self.instance.id}: replay asked for {kind} step {label!r} at position "
                    f"{position}, but the history recorded it as a {rec.kind} step at position {rec.position}"
                ),
                step=label,
            )
        return seq, position, rec

    def replay_mismatch(self, what: str) -> NonDeterministicReplay:
        """The error for a replay that contradicts the history, naming both versions: the one the
        instance started on and the one this code is. Only built on that path: a replay that
        matches pays nothing for versions."""
        return replay_mismatch(
            what,
            workflow=self.instance.workflow,
            started_on=self.instance.workflow_version,
            code_version=get_workflow(self.instance.workflow).version,
        )

    def version_at_least(self, version: int) -> bool:
        """True when the instance started on `version` of its workflow or later (step.version_at_least)."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise InvalidStepConfig(
                f"step.version_at_least takes a whole version number of at least 1; got {version!r}"
            )
        code = get_workflow(self.instance.workflow).version
        if version > code:
            raise InvalidStepConfig(
                f"workflow {self.instance.workflow!r} guards a path with step.version_at_least({version}), but its "
                f"`version` is {code}; set `version = {version}` on the class so new instances take that path"
            )
        return self.instance.workflow_version >= version

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
            raise InvalidStepConfig(f"rollback of step {name!r} must be callable; got {rollback!r}")
        seq, position, rec = self.reserve(name, StepKind.DO)
        return Prepared(
            name=name,
            seq=seq,
            position=position,
            kind=StepKind.DO,
            rec=rec,
            config=config,
            sensitive=bool(options.get("sensitive", False)),
            rollback=rollback,
            deferred=options.get("checkpoint") == "deferred",
        )

    def memo(self, p: Prepared) -> tuple[bool, Any]:
        """(True, result) for a completed step; raises its stored failure; (False, None) to run."""
        rec = p.rec
        if rec is None:
            return False, None
        if rec.status == StepStatus.COMPLETE:
            result = unseal_value(rec.result)
            self._register_rollback(p, result)
            return True, result
        if rec.status == StepStatus.ERRORED:
            self.failed_step = p.label
            if rec.error_message != REDACTED:
                raise rebuild_error(rec.error_name, rec.error_message, rec.error_state)
            message, _, state = open_failure(rec.error_message, self.store.step_traceback(rec))
            raise mark_sensitive(rebuild_error(rec.error_name, message, state))
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
        key = f"{self.instance.id}:{p.name}:{p.seq}"
        if self.instance.generation:
            key += f":g{self.instance.generation}"
        if rec is not None:
            if rec.wake_at is not None and rec.wake_at > now:
                raise Suspend(rec.wake_at)  # still backing off before the next attempt
            if rec.status == StepStatus.RUNNING and rec.wake_at is None:
                # The worker running it died mid-attempt. What that attempt was answered and booked
                # is the next one's to replay; taken over first, so a crash in between loses none.
                journal_adopt(key=key, lost=rec.attempts, attempt=rec.attempts + 1)
                self._record_lost_attempt(p, now)
            attempt = rec.attempts + 1
        assert p.config is not None
        p.rec = self.store.step_started(
            rec=rec,
            name=p.name,
            seq=p.seq,
            position=p.position,
            kind=p.kind,
            config=p.config,
            attempt=attempt,
            now=now,
            sensitive=p.sensitive,
            has_rollback=p.rollback is not None,
        )
        self.by_key[(p.name, p.seq)] = self.by_pos[p.position] = p.rec
        ctx = StepContext(
            name=p.name,
            count=p.seq,
            attempt=attempt,
            config=p.config.as_json(),
            idempotency_key=key,
            instance_id=self.instance.id,
            workflow=self.instance.workflow,
            tenant=self.instance.tenant,
            step_label=p.label,
            _journal=StepJournal(
                key=key,
                instance_id=self.instance.id,
                tenant=self.instance.tenant,
                attempt=attempt,
                sensitive=p.sensitive,
            ),
        )
        return ctx, now

    def log_capture(self, p: Prepared, ctx: StepContext) -> steplog.Capture | steplog.NotKept:
        """Where the attempt's log lines go (runtime/steplog.py): nowhere for a sensitive step,
        whose lines may hold what it was trusted with."""
        if p.sensitive:
            return steplog.NotKept()
        return steplog.Capture(self.instance, self.store.token, p, ctx.attempt)

    def _record_lost_attempt(self, p: Prepared, now: datetime) -> None:
        assert p.rec is not None
        started = p.rec.started_at or now
        self.store.step_attempt_failed(
            p.rec,
            attempt=p.rec.attempts,
            started=started,
            now=now,
            retry_at=now,
            failure=Failure(
                WORKER_LOST,
                "the worker running this attempt stopped before it "
                "finished (its lease expired); running the step again",
            ),
            logs=self.store.live_lines(p.rec),  # what it logged up to its last live write
        )
        p.rec.wake_at = None

    def succeeded(self, p: Prepared, ctx: StepContext, started: datetime, result: Any, logs: str | None = None) -> Any:
        """Store a successful attempt (`logs`: what it logged, runtime/steplog.py) and return its result."""
        self._release(ctx)
        now = self.now()
        try:
            stored, encoded = encode_result(p.label, self.instance.id, result)
        except EngineError as error:
            self.failed_step = p.label
            assert p.rec is not None
            self.store.step_attempt_failed(
                p.rec,
                attempt=ctx.attempt,
                started=started,
                now=now,
                failure=Failure(type(error).__name__, str(error)),
                retry_at=None,
                logs=logs,
            )
            raise FailInstance(error, step=p.label) from None
        assert p.rec is not None
        if p.sensitive:
            # Stored encrypted; this turn and the rollback keep the clear value in memory.
            sealed = seal_value(stored)
            self.store.step_completed(
                p.rec,
                attempt=ctx.attempt,
                started=started,
                now=now,
                result=sealed,
                encoded=json.dumps(sealed),
                deferred=p.deferred,
                logs=logs,
            )
            p.rec.result = stored
        else:
            self.store.step_completed(
                p.rec,
                attempt=ctx.attempt,
                started=started,
                now=now,
                result=stored,
                encoded=encoded,
                deferred=p.deferred,
                logs=logs,
            )
        self._register_rollback(p, stored)
        return stored

    def failed(
        self, p: Prepared, ctx: StepContext, started: datetime, exc: BaseException, logs: str | None = None
    ) -> None:
        """Record a failed attempt (`logs`: what it logged); return to retry now, raise Suspend to
        retry later, or re-raise."""
        self._release(ctx)
        now = self.now()
        assert p.rec is not None and p.config is not None
        if p.sensitive:
            mark_sensitive(exc)
        failure = failure_of(exc)
        if isinstance(exc, budgets.AwaitApproval):
            self.store.step_attempt_failed(
                p.rec,
                attempt=ctx.attempt,
                started=started,
                now=now,
                failure=Failure(AWAITING_APPROVAL, str(exc)),
                retry_at=now,
                logs=logs,
            )
            raise Suspend(now, status=Status.RUNNING, pause=True) from None
        if isinstance(exc, budgets.BudgetHeld):
            # Not a failure of the step: it waits for other steps' holds and does not spend a retry.
            again = now + timedelta(seconds=budgets.HOLD_WAIT.delay(self.store.held_waits(p.rec) + 1))
            held = Failure(BUDGET_HELD, str(exc))
            self.store.step_attempt_failed(
                p.rec, attempt=ctx.attempt, started=started, now=now, failure=held, retry_at=again, logs=logs
            )
            _log_failed(p, ctx.attempt, held, retry_at=again, now=now)
            raise Suspend(again) from None
        if isinstance(exc, CircuitOpen):
            # The call was not made: the step waits for the breaker's next probe without spending
            # a retry, and (released above) holds no budget meanwhile. Never skipped, even when
            # a test skips retry delays: retrying at once would only meet the open breaker again.
            again = now + timedelta(seconds=max(exc.retry_after, 0.001))
            waited = Failure(CIRCUIT_OPEN, str(exc))
            self.store.step_attempt_failed(
                p.rec, attempt=ctx.attempt, started=started, now=now, failure=waited, retry_at=again, logs=logs
            )
            _log_failed(p, ctx.attempt, waited, retry_at=again, now=now)
            raise Suspend(again) from None
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
        self.store.step_attempt_failed(
            p.rec, attempt=ctx.attempt, started=started, now=now, failure=failure, retry_at=retry_at, logs=logs
        )
        _log_failed(p, ctx.attempt, failure, retry_at=retry_at, now=now)
        if retry_at is None:
            self.failed_step = p.label
            raise exc
        if retry_at > now:
            raise Suspend(retry_at)

    def _release(self, ctx: StepContext) -> None:
        if ctx._reservations:
            budgets.reservations_release(ids=ctx._reservations)
            ctx._reservations.clear()

    def _register_rollback(self, p: Prepared, result: Any) -> None:
        if p.rollback is not None:
            with self._lock:
                self.rollbacks.append((p.position, p.label, p.rollback, result))

    # ---- the turn ----------------------------------------------------------------------

    def check_deadline(self) -> None:
        """Past the workflow's timeout, the instance errors at this step boundary."""
        error = self.timed_out()
        if error is not None:
            raise FailInstance(error, step="")

    def timed_out(self) -> WorkflowTimeout | None:
        """The workflow's timeout as an error, once it has passed; None before."""
        if not flow.timed_out(deadline=self.deadline, now=self.now()):
            return None
        timeout = get_workflow(self.instance.workflow)._timeout
        assert self.deadline is not None and timeout is not None
        return WorkflowTimeout(
            workflow=self.instance.workflow,
            instance_id=self.instance.id,
            timeout=timeout.total_seconds(),
            started_at=f"{self.deadline - timeout:%Y-%m-%d %H:%M:%S} UTC",
        )


def _log_failed(p: Prepared, attempt: int, failure: Failure, *, retry_at: datetime | None, now: datetime) -> None:
    """One line per failed attempt (the log context names instance, step and attempt). A
    sensitive step's message is left out: it may hold what the step was trusted with."""
    what = failure.name if p.sensitive else f"{failure.name}: {failure.message[:300]}"
    if retry_at is None:
        log.warning("step %s failed for good on attempt %d (%s)", p.label, attempt, what)
    else:
        log.info(
            "step %s attempt %d failed (%s); retrying in %.1f s",
            p.label,
            attempt,
            what,
            (retry_at - now).total_seconds(),
        )


def _nothing() -> None:
    pass


def replay_mismatch(what: str, *, workflow: str, started_on: int, code_version: int) -> NonDeterministicReplay:
    """`what` went wrong, with both versions and what to do. Across versions a VersionMismatch
    (a code change without a guard); within one version a NonDeterministicReplay (code outside
    steps that is not deterministic, or a change made without bumping `version`)."""
    if started_on != code_version:
        return VersionMismatch(
            f"{what}; the instance started on version {started_on} of workflow {workflow!r} and this code is "
            f"version {code_version} — guard the changed steps with step.version_at_least({code_version}) so instances "
            f"started on version {started_on} keep their path, or restart the instance",
            workflow=workflow,
            started_on=started_on,
            code_version=code_version,
        )
    return NonDeterministicReplay(
        f"{what}; the instance started on version {started_on} of workflow {workflow!r} and this code is also "
        f"version {code_version} — code outside steps must be deterministic; if the workflow changed, set "
        f"`version = {code_version + 1}` and guard the new steps with step.version_at_least({code_version + 1})"
    )
