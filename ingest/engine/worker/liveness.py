"""A worker's own PostgreSQL session: its liveness, its wake-ups, and the watch for dead workers.

One connection per worker process, held for its life (PostgreSQL only):
- it holds the worker's liveness lock (sql/liveness.py), which ends with the session: a worker
  killed with SIGKILL loses it at once, where its leases used to wait out their 30 s;
- it LISTENs for ready instances and wakes the claim loop;
- every SCAN_SECONDS it looks for session-tied leases whose owner holds no lock. An owner seen
  so for GRACE_SECONDS on end, by this same session, is dead: its leases expire now, the claim
  loops take them over, and the money its attempts held on budgets is released.

The grace keeps a living worker's instances its own. A restart ends every session at once, and
every lock with it; each worker reconnects within its backoff (50 ms at first, one second at
most) and takes its lock again, long before another's watch has seen it absent for two seconds.
A watch that loses its own session forgets what it saw and starts observing afresh, so time the
database was away never counts against anyone. What is left: a worker that cannot reconnect
for two seconds while others can (its own network, say) may see its instances taken over while
its steps still run; its writes are then refused (their lease token no longer matches), so the
ledger stays whole, and those steps have run twice, as after a lease that expired.

This connection failing is also how the process learns that the server went away: every
connection of the process opened before is presumed dead (pg.connections_lost) and each is
replaced before its next use instead of failing on it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ingest.engine import clock, pg
from ingest.engine.backoff import Backoff, FailureLog
from ingest.engine.sql import liveness as sql_liveness
from ingest.engine.sql.channels import READY_CHANNEL, listen, notify

log = logging.getLogger("runledger.engine")

SCAN_SECONDS = 0.5
GRACE_SECONDS = 2.0
BACKOFF = Backoff(first=0.05, cap=1.0)


def overdue(
    seen: dict[str, float], absent: Iterable[str], *, now: float, grace: float, me: str
) -> tuple[dict[str, float], list[str]]:
    """`seen`: since when each owner has been seen without its lock, by this session. Returns the
    same for the owners `absent` now, and those absent for `grace` seconds or more: dead."""
    current = {owner: seen.get(owner, now) for owner in absent if owner != me}
    return current, sorted(owner for owner, since in current.items() if now - since >= grace)


class Liveness:
    """The thread of a worker's session (`run`); `tied` is set while its lock is held, and says
    whether its claims may take session-tied leases."""

    def __init__(
        self,
        *,
        worker_id: str,
        wake: threading.Event,
        stopped: threading.Event,
        released: Callable[[list[int]], None] | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.wake = wake
        self.stopped = stopped
        # Called with the budget reservations of dead workers' attempts, after their leases were
        # taken and before any claim loop is told: the money is back before the work restarts.
        self.released = released
        self.connected = threading.Event()
        self.tied = False
        self._failures = FailureLog()

    def run(self) -> None:
        import psycopg

        failures = 0
        while not self.stopped.is_set():
            try:
                with psycopg.connect(pg.connection_string(), autocommit=True) as conn:
                    self._open(conn)
                    failures = 0
                    self._serve(conn)
            except Exception as exc:  # noqa: BLE001 - a lost session is the point: reconnect
                self.connected.clear()
                self.tied = False
                if self.stopped.is_set():
                    break
                pg.connections_lost()
                failures += 1
                shout, count = self._failures.failed(now=time.monotonic())
                if shout:
                    log.warning(
                        "worker %s: its database session is gone (%s); reconnecting, claims wait "
                        "(%d failure(s) so far)",
                        self.worker_id,
                        first_line(exc),
                        count,
                    )
                self.stopped.wait(BACKOFF.delay(failures))
        self.connected.clear()

    def _open(self, conn: Any) -> None:
        self.tied = sql_liveness.lock(conn, owner=self.worker_id)
        if not self.tied:
            log.warning(
                "worker %s: another session holds this worker's liveness lock (two worker ids "
                "with one hash); its leases expire as leases, not with its session",
                self.worker_id,
            )
        listen(conn, READY_CHANNEL)
        count = self._failures.recovered()
        if count:
            log.warning("worker %s: its database session is back after %d failure(s)", self.worker_id, count)
        self.connected.set()
        self.wake.set()  # notifications sent while the session was away are lost: claim now

    def _serve(self, conn: Any) -> None:
        seen: dict[str, float] = {}
        next_scan = time.monotonic() + SCAN_SECONDS
        while not self.stopped.is_set():
            for _ in conn.notifies(timeout=max(0.0, next_scan - time.monotonic()), stop_after=1):
                self.wake.set()
            if time.monotonic() >= next_scan:
                next_scan = time.monotonic() + SCAN_SECONDS
                seen = self._watch(conn, seen)

    def _watch(self, conn: Any, seen: dict[str, float]) -> dict[str, float]:
        seen, dead = overdue(
            seen,
            sql_liveness.absent_owners(conn, now=clock.now()),
            now=time.monotonic(),
            grace=GRACE_SECONDS,
            me=self.worker_id,
        )
        if not dead:
            return seen
        taken, held = sql_liveness.reap(conn, owners=dead, now=clock.now())
        if taken:
            if self.released is not None:  # before any claim loop is woken to take them over
                self.released(held)
            log.warning(
                "worker %s: worker(s) %s lost their database session %.0f s ago; their %d instance(s) "
                "are runnable again: %s",
                self.worker_id,
                ", ".join(dead),
                GRACE_SECONDS,
                len(taken),
                ", ".join(sorted(taken)[:20]) + (" …" if len(taken) > 20 else ""),
            )
            notify(conn, READY_CHANNEL)  # every worker's claim loop, this one's too
        return {owner: since for owner, since in seen.items() if owner not in dead}


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
