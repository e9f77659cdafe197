"""Durable execution by replay: one worker turn of one instance, step by step.

`run(event, step)` executes from the top on every turn. A step whose result is in the ledger
returns it without running; the first step without one runs. A turn ends when `run` returns or
raises (the instance finishes), or when a step must wait (sleep, event, child, retry delay,
pause, drain): then `Suspend` unwinds `run` and the instance is released with a wake-up time,
holding no thread and no memory until then.

`Execution` holds a turn's replay state (its base `ReplayState`, replay_state.py: the history,
each call's position and the checks at each step boundary) and the life of one `step.do`; its
collaborators run the rest: invoke.py runs the step function, outcomes.py says what a result or
a failure is stored as, turn.py replays `run` and ends the turn, store.py and its siblings write
the ledger.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ingest.engine.costs import budgets
from ingest.engine.errors import (
    CircuitOpen,
    EngineError,
    InvalidStepConfig,
    NonRetryableError,
)
from ingest.engine.models import AttemptWait, Status, StepKind, StepStatus
from ingest.engine.runtime import steplog
from ingest.engine.runtime.context import StepContext
from ingest.engine.runtime.failures import failure_of, mark_sensitive, open_failure, rebuild_error
from ingest.engine.runtime.journal import StepJournal, journal_adopt
from ingest.engine.runtime.outcomes import (
    FailInstance,
    Suspend,
    encode_result,
)
from ingest.engine.runtime.policy import (
    StepConfig,
    check_step_options,
    next_delay,
    resolve_config,
)
from ingest.engine.runtime.records import Failure, StepRecord, step_label
from ingest.engine.runtime.replay_state import ReplayState
from ingest.engine.runtime.step_writes import StepStart
from ingest.engine.secrets import REDACTED, seal_value, unseal_value

log = logging.getLogger("runledger.engine")

# What an attempt that waited rather than failed is stored under (plain strings, as failures' names are).
AWAITING_APPROVAL = AttemptWait.AWAITING_APPROVAL.value
BUDGET_HELD = AttemptWait.BUDGET_HELD.value
CIRCUIT_OPEN = AttemptWait.CIRCUIT_OPEN.value
WORKER_LOST = "WorkerLost"
ROLLBACK_POSITION = 1_000_000


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


class Execution(ReplayState):
    """One turn of one instance: its replay state (`ReplayState`) and the life of one `step.do`;
    `step` objects call into it."""

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
        start = StepStart(
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
        p.rec = self.store.step_started(rec, start)
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
