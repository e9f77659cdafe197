"""A background loop that does one round of work every few seconds until it is told to stop.

The cron scheduler and the dashboard's rollup runner are both such a loop: run in a process of
their own (a management command calls `run()`) or in a daemon thread beside the embedded worker
(`start()`), survive any error in a round, and leave no database connection behind. A subclass
says what one round is (`run_once`) and, where it holds state across rounds (the scheduler's
leadership), what to forget after a failed round (`after_error`) and what to release on the way
out (`at_exit`). Who may run a round (an advisory lock) stays with the subclass: the scheduler
keeps a session lock across rounds; the rollup runner and the alert checks take a transaction lock
per pass (`as_leader`).
"""

from __future__ import annotations

import logging
import signal
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import datetime
from typing import ClassVar, TypeVar

from django.db import connection, transaction
from django.utils import timezone

from ingest.engine.sql.advisory import xact_lock_try

Clock = Callable[[], datetime]
T = TypeVar("T")


def as_leader(lock_key: int, work: Callable[[], T]) -> T | None:
    """`work()` in one transaction that holds the advisory lock `lock_key`, or None without
    running it while another process's transaction holds that lock (PostgreSQL). SQLite has a
    single process: `work()` just runs in a transaction."""
    with transaction.atomic():
        if not xact_lock_try(lock_key):
            return None
        return work()


class Periodic(ABC):
    """`run()` calls `run_once` every `interval` seconds until `stop()` or `request_stop()`."""

    #: The thread's name in `start()` (shown by py-spy, faulthandler and thread dumps).
    thread_name: ClassVar[str] = "runledger-periodic"
    #: What one round is called in the log line of a failed round.
    round_name: ClassVar[str] = "periodic round"
    log: ClassVar[logging.Logger] = logging.getLogger("runledger.periodic")

    def __init__(self, *, interval: float) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @abstractmethod
    def run_once(self, clock: Clock) -> object:
        """One round of work. An exception is logged and the next round comes as usual."""

    def after_error(self) -> None:
        """Called after a round failed, before its connection is closed (forget what it may have
        lost with that connection). Nothing by default."""
        return None

    def at_exit(self) -> None:
        """Called once when `run()` returns, before its connection is closed. Nothing by default."""
        return None

    @property
    def stopping(self) -> bool:
        """True once a stop was asked: a long round checks it to end early."""
        return self._stop.is_set()

    def run(self, *, clock: Clock = timezone.now) -> None:
        """Rounds every `interval` seconds until stopped; errors are logged, never fatal."""
        try:
            while not self._stop.is_set():
                try:
                    self.run_once(clock)
                except Exception:
                    self.log.exception("%s failed; retrying in %.1f s", self.round_name, self.interval)
                    self.after_error()
                    connection.close()  # a broken connection must not serve the next round
                self._stop.wait(self.interval)
        finally:
            try:
                self.at_exit()
            finally:
                connection.close()

    def run_until_signalled(self, *, clock: Clock = timezone.now) -> None:
        """`run()` in this, the main, thread until SIGTERM or SIGINT (a management command's
        loop); the signal handlers in place before are put back when it returns."""
        signals = (signal.SIGTERM, signal.SIGINT)
        before = {sig: signal.getsignal(sig) for sig in signals}
        for sig in signals:
            signal.signal(sig, lambda *_: self.request_stop())
        try:
            self.run(clock=clock)
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)

    def start(self) -> threading.Thread:
        """Run in a daemon thread (the embedded `manage.py up`)."""
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name=self.thread_name, daemon=True)
        self._thread.start()
        return self._thread

    def request_stop(self) -> None:
        """Ask `run()` to return after the current round (safe from a signal handler)."""
        self._stop.set()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Ask the loop to stop and wait up to `timeout` seconds for `start()`'s thread to end."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
