"""`manage.py worker`: run a worker process until SIGTERM/SIGINT, then drain and exit 0."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest.engine import logcontext
from ingest.engine.worker.database import worker_db
from ingest.engine.worker.loop import Worker

log = logging.getLogger("runledger.engine.worker")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# How long the main thread sleeps between looks at its stop flag. A signal the kernel hands to
# the main thread wakes it at once; one handed to a thread started before the worker's own
# (a library's) runs its handler only when the main thread next runs Python code.
WAKE_SECONDS = 0.5


class Command(BaseCommand):
    help = (
        "Start a worker that claims and runs workflow instances. SIGTERM or SIGINT drains it: "
        "nothing new is claimed, in-flight steps finish, leases are released, exit 0. On "
        "PostgreSQL run as many as you like on as many machines; on SQLite one worker process runs."
    )
    # The system checks import every URLconf, view and API schema (about a second of a worker's
    # start, for pages a worker never serves); the web process and the deploy run them.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--concurrency",
            type=int,
            default=8,
            help="instances running steps at once (default 8); a slot whose turn has only "
            "its last write left is claimed for again meanwhile",
        )
        parser.add_argument(
            "--lease",
            type=float,
            default=None,
            help="lease seconds (default RUNLEDGER_LEASE_SECONDS, 30): how long a dead worker's "
            "instances wait before another worker takes them over",
        )
        parser.add_argument(
            "--poll",
            type=float,
            default=None,
            help="seconds between polls when idle (default RUNLEDGER_POLL_SECONDS, 1)",
        )
        parser.add_argument(
            "--drain-timeout",
            type=float,
            default=600.0,
            help="seconds to wait for in-flight steps on SIGTERM (default 600)",
        )
        parser.add_argument("--id", default=None, help="worker id shown in the ledger (default host:pid:random)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["concurrency"] < 1:
            raise CommandError(f"--concurrency must be at least 1; got {options['concurrency']}")
        # Until here a SIGTERM ends the process (the default action): it holds no lease yet.
        stop = threading.Event()
        for sig in STOP_SIGNALS:
            signal.signal(sig, lambda *_: stop.set())
        lock = worker_db().process_lock()  # SQLite: one worker process per database
        try:
            worker = Worker(
                concurrency=options["concurrency"],
                worker_id=options["id"],
                lease_seconds=options["lease"],
                poll_seconds=options["poll"],
            )
            with logcontext.bind(worker=worker.worker_id):
                self._run(worker, stop, drain_timeout=options["drain_timeout"])
        finally:
            if lock is not None:
                lock.close()

    def _run(self, worker: Worker, stop: threading.Event, *, drain_timeout: float) -> None:
        # Everything loaded so far (Django, the apps, the registered workflows) lives as long as
        # the process: out of the collector's way, so a full collection walks only what the
        # turns create, not ~200,000 startup objects (dashboard/warm.py does the same for web).
        gc.collect()
        gc.freeze()
        with _stop_signals_blocked():
            # Every thread the worker starts (and the turn threads they start) inherits this
            # mask, so the kernel hands a SIGTERM to the main thread, the one thread that runs
            # Python's handlers, instead of a thread busy claiming or in a step. A signal that
            # came meanwhile stays pending and is handled when the mask lifts, after the start.
            if stop.is_set():
                self._say(worker, "stopped before it started: nothing was claimed", phase="stopped", turns=0)
                return
            worker.start()
        self._say(
            worker,
            f"started (concurrency {worker.concurrency})",
            phase="started",
            concurrency=worker.concurrency,
            lease_seconds=worker.lease.total_seconds(),
            poll_seconds=worker.poll,
            pid=os.getpid(),
            database=settings.DATABASES["default"]["ENGINE"],
        )
        while not stop.wait(WAKE_SECONDS):
            pass
        self._say(
            worker, f"draining {worker.inflight} in-flight instance(s)", phase="draining", inflight=worker.inflight
        )
        clean = worker.stop(timeout=drain_timeout)
        self._say(
            worker,
            f"stopped after {worker.turns} turn(s)" + ("" if clean else " (drain timed out; leases will expire)"),
            phase="stopped",
            turns=worker.turns,
            drained=clean,
        )

    def _say(self, worker: Worker, what: str, **fields: Any) -> None:
        """A line of the worker's life: plain on stdout, or a JSON log record (its facts as
        fields) when the logs are JSON, so a log pipeline parses every line of the process."""
        message = f"worker {worker.worker_id} {what}"
        if getattr(settings, "RUNLEDGER_LOG_FORMAT", "console") == "json":
            log.log(logging.WARNING if fields.get("drained") is False else logging.INFO, message, extra=fields)
            return
        self.stdout.write(message)
        self.stdout.flush()


@contextlib.contextmanager
def _stop_signals_blocked() -> Iterator[None]:
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
