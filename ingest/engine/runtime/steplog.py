"""What a step logged: the lines Python's `logging` made inside a step attempt's code, kept with
the attempt in the ledger, bounded, redacted, and written while a long attempt still runs.

Capture. `install` (the engine's app, at start-up) wraps logging's record factory: a record made
while a step attempt runs on this thread or asyncio task (a contextvar, bound by `capture`
around the step function only) is handed to that attempt's `Capture`. A record is made only for
a line its logger lets through: `runledger.*` loggers at RUNLEDGER_LOG_LEVEL, others at the
root's level (WARNING unless configured). A thread the step's code starts itself does not carry
the binding, and a sensitive step's lines are not kept at all.

Bounds. An attempt keeps its last RUNLEDGER_STEP_LOG_LINES lines, at most RUNLEDGER_STEP_LOG_BYTES
of text, each line cut at MAX_LINE characters; the earlier lines are dropped and counted
(`dropped`, which the console and the API show as "truncated").

Redaction. Every line leaves the capture through `ingest.engine.redaction.redact`, the one
redaction every sink applies, so the ledger keeps no secret the logs carried.

Writes. An attempt that logged nothing writes nothing. One that did gives its lines to the write
that ends it (the attempt's row, in the same statement: `Capture.kept`). An attempt that runs
longer than RUNLEDGER_STEP_LOG_SECONDS with lines not written yet has them written by this
module's thread to its step's row (`live_log`), with a `step.log` history row the dashboard's
live feed pushes, at most once per that interval; the write that ends the attempt clears it.
"""

from __future__ import annotations

import collections
import contextvars
import json
import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any, Protocol

from django.conf import settings
from django.db import DatabaseError, connection, transaction

from ingest.engine import clock
from ingest.engine.backoff import FailureLog
from ingest.engine.models import History, HistoryKind, Instance, Step, StepStatus
from ingest.engine.redaction import redact
from ingest.engine.writes import notify

log = logging.getLogger("runledger.engine")

MAX_LINE = 4000  # characters of one line (its traceback included) that are kept
DEFAULT_LINES = 200
DEFAULT_BYTES = 32 * 1024
DEFAULT_SECONDS = 1.0
IDLE_CLOSE_SECONDS = 2.0
_FAILURES = FailureLog()
_FIRST = threading.Lock()

_current: contextvars.ContextVar[Capture | None] = contextvars.ContextVar("runledger_step_log", default=None)


class StepName(Protocol):
    name: str
    seq: int

    @property
    def label(self) -> str: ...


class Capture:
    """One attempt's lines, oldest first, within the bounds; `dropped` counts the lines left out.

    Bound as the attempt's capture inside `with` (a context manager, not a generator one: it is on
    every step's path, so it costs four attribute sets and a contextvar set; the state of its lines
    is made at the first line, most attempts logging none)."""

    lines: collections.deque[tuple[float, str, str, str]] | None = None
    size = 0
    dropped = 0
    closed = False
    written = 0  # lines (dropped ones included) the live writes have covered
    lock: threading.Lock | None = None
    most_lines = most_bytes = 0
    _bound: contextvars.Token[Capture | None] | None = None

    def __init__(self, instance: Instance, token: str, step: StepName, attempt: int) -> None:
        self.instance, self.token, self.step, self.attempt = instance, token, step, attempt
        self.started = time.monotonic()

    def __enter__(self) -> Capture:
        self._bound = _current.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed = True
        if self._bound is not None:
            _current.reset(self._bound)

    @property
    def total(self) -> int:
        """Every line the attempt logged, the dropped ones included."""
        return self.dropped + (len(self.lines) if self.lines is not None else 0)

    def add(self, record: logging.LogRecord) -> None:
        if self.closed:
            return
        line = (record.created, record.levelname, record.name, _text(record))
        cost = len(line[3]) + len(line[2]) + 32
        if self.lines is None:
            with _FIRST:  # an async step's threads may log their first lines at once
                if self.lines is None:
                    self.lock = threading.Lock()
                    self.most_lines = max(1, int(getattr(settings, "RUNLEDGER_STEP_LOG_LINES", DEFAULT_LINES)))
                    self.most_bytes = max(1, int(getattr(settings, "RUNLEDGER_STEP_LOG_BYTES", DEFAULT_BYTES)))
                    self.lines = collections.deque()
                    _flusher.watch(self)
        assert self.lock is not None and self.lines is not None
        with self.lock:
            self.lines.append(line)
            self.size += cost
            while len(self.lines) > self.most_lines or (self.size > self.most_bytes and len(self.lines) > 1):
                gone = self.lines.popleft()
                self.size -= len(gone[3]) + len(gone[2]) + 32
                self.dropped += 1

    def snapshot(self) -> dict[str, Any] | None:
        """The kept lines as stored: {"lines": [{at, level, logger, message}], "dropped": n}, redacted."""
        if self.lines is None or self.lock is None:
            return None
        with self.lock:
            lines, dropped = list(self.lines), self.dropped
        return {
            "lines": [
                {
                    "at": datetime.fromtimestamp(at, tz=UTC).isoformat(timespec="milliseconds"),
                    "level": level,
                    "logger": name,
                    "message": redact(text),
                }
                for at, level, name, text in lines
            ],
            "dropped": dropped,
        }

    def kept(self) -> str | None:
        """Stop collecting and give the lines to the write that ends the attempt (JSON text), or
        None when it logged nothing."""
        self.closed = True
        kept = self.snapshot()
        return None if kept is None else json.dumps(kept)


class NotKept:
    """A sensitive step's attempt: its lines may hold what it was trusted with, so none is kept."""

    _bound: contextvars.Token[Capture | None] | None = None

    def __enter__(self) -> NotKept:
        self._bound = _current.set(None)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bound is not None:
            _current.reset(self._bound)

    def kept(self) -> None:
        return None


def _text(record: logging.LogRecord) -> str:
    try:
        text = record.getMessage()
    except Exception:  # noqa: BLE001 - a malformed call still gets kept, as logging would print it
        text = str(record.msg)
    if record.exc_info and record.exc_info[1] is not None:
        text += "\n" + logging.Formatter().formatException(record.exc_info)
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


# ---- capture: logging's record factory -------------------------------------------------------

_previous: Any = None


def install() -> None:
    """Hand every log record made inside a step attempt to its capture (once per process)."""
    global _previous
    if _previous is not None:
        return
    _previous = logging.getLogRecordFactory()
    previous = _previous

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record: logging.LogRecord = previous(*args, **kwargs)
        made = _current.get()
        if made is not None:
            made.add(record)
        return record

    logging.setLogRecordFactory(factory)


# ---- live: a long attempt's lines, written while it runs ------------------------------------------


class Flusher:
    """The attempts that logged, and the thread that writes the lines of those running longer
    than RUNLEDGER_STEP_LOG_SECONDS. Watching an attempt costs an append under a lock; the
    thread sleeps while none is watched."""

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.watched: list[Capture] = []
        self._thread: threading.Thread | None = None

    def watch(self, made: Capture) -> None:
        with self.cond:
            self.watched.append(made)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="runledger-step-logs", daemon=True)
                self._thread.start()
            self.cond.notify()

    def due(self, *, now: float, every: float) -> list[Capture]:
        """The watched attempts whose lines are due for a write; forgets the ended ones."""
        with self.cond:
            self.watched = [c for c in self.watched if not c.closed]
            return [c for c in self.watched if now - c.started >= every and c.total > c.written]

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.watched:
                    if not self.cond.wait(timeout=IDLE_CLOSE_SECONDS):
                        connection.close()  # idle: hold no connection
            every = float(getattr(settings, "RUNLEDGER_STEP_LOG_SECONDS", DEFAULT_SECONDS))
            time.sleep(max(every, 0.05))
            wrote = False
            for made in self.due(now=time.monotonic(), every=every):
                try:
                    wrote = live_write(made) or wrote
                except DatabaseError as exc:  # the attempt's end write keeps the lines anyway
                    shout, count = _FAILURES.failed(now=time.monotonic())
                    if shout:
                        log.warning(
                            "could not write the running lines of step %s of %s (%s; %d such failure(s) "
                            "in this process)",
                            made.step.label,
                            made.instance.id,
                            exc,
                            count,
                        )
                    connection.close()
            if wrote:
                notify.history()


def live_write(made: Capture) -> bool:
    """Write a running attempt's lines to its step's row and say so in the history, while the
    worker still holds the instance and the attempt is the step's current one. True when written."""
    total = made.total
    kept = made.snapshot()
    if kept is None or made.closed:
        return False
    now = clock.now()
    inst, step = made.instance, made.step
    held = Instance.objects.filter(id=inst.id, lease_token=made.token, lease_expires_at__gt=now)
    with transaction.atomic():
        changed = Step.objects.filter(
            instance_id=inst.id,
            name=step.name,
            seq=step.seq,
            status=StepStatus.RUNNING,
            attempts=made.attempt,
            instance_id__in=held.values("id"),
        ).update(live_log={"attempt": made.attempt, **kept})
        if changed:
            History.objects.create(
                instance_id=inst.id,
                workflow=inst.workflow,
                tenant=inst.tenant,
                kind=HistoryKind.STEP_LOG,
                step_name=step.label,
                data={"attempt": made.attempt, "lines": total},
                created_at=now,
            )
    if not changed:
        return False  # no row yet (its start marker comes first), or no longer this attempt's: next time
    made.written = total
    return True


_flusher = Flusher()
