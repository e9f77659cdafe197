"""Workers: claim runnable instances under a lease, run one turn each, release them.

A worker holds a thread only for an instance that is executing a turn. Sleeping, waiting and
backing-off instances are rows with a `ready_at`; the worker finds them again when they are
due. On PostgreSQL, any number of workers on any number of machines share one database (claims
use SKIP LOCKED; LISTEN/NOTIFY wakes idle workers at once). On SQLite one worker process runs.

Faults: a turn whose write fails on the database (a restart, a read-only or full database, a
timeout) is retried by this worker, which still holds its lease, as soon as the database
answers again, instead of being left for the lease to expire; the claim loop and the heartbeat
back off and log the same way (backoff.py). On PostgreSQL each worker's leases are tied to its
own session (liveness.py): a worker killed with SIGKILL is noticed, and its instances taken
over, within seconds.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, transaction

from ingest.engine import clock, logcontext, pg
from ingest.engine.backoff import Backoff, FailureLog
from ingest.engine.costs.budgets import reservations_release, reservations_release_orphaned
from ingest.engine.runtime.outcomes import TurnEnd
from ingest.engine.runtime.records import EngineFault
from ingest.engine.sql import lease as sql_lease
from ingest.engine.sql import liveness as sql_liveness
from ingest.engine.sql import workers as sql_workers
from ingest.engine.sql.base import drop_broken_connection
from ingest.engine.sql.claim import Claimed
from ingest.engine.worker.database import worker_db
from ingest.engine.worker.liveness import first_line
from ingest.engine.worker.turns import claim, lease_token, run_turn
from ingest.engine.writes import commits

log = logging.getLogger("runledger.engine")

BACKOFF = Backoff(first=0.05, cap=1.0)
# A turn that fails again and again while the database answers (a write it refuses every time)
# is given up after this many tries and left to its lease, as every failed turn once was.
STRIKES = 10


class Worker:
    """Runs up to `concurrency` instances at once, in threads of this process."""

    def __init__(
        self,
        *,
        concurrency: int = 8,
        worker_id: str | None = None,
        lease_seconds: float | None = None,
        poll_seconds: float | None = None,
    ) -> None:
        self.concurrency = max(1, concurrency)
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.lease = timedelta(seconds=lease_seconds or settings.RUNLEDGER_LEASE_SECONDS)
        self.poll = poll_seconds or settings.RUNLEDGER_POLL_SECONDS
        self.draining = threading.Event()
        self.stopped = threading.Event()
        self.wake = threading.Event()
        self._inflight: dict[str, str] = {}  # instance id -> lease token
        # In flight, with nothing left but the turn's last write: their slots are claimed for
        # again while that commits, and the pool has a thread for each of those newcomers.
        self._ending: set[str] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=2 * self.concurrency, thread_name_prefix="runledger-turn")
        self._threads: list[threading.Thread] = []
        self._claimed_at = clock.now()
        self._claim_conn: Any = None  # the claim loop's engine connection (PostgreSQL)
        self._claim_epoch = 0  # pg.connections_epoch() when it was opened
        self._claim_failures = FailureLog()
        self._beat_failures = FailureLog()
        self._renew_failures = FailureLog()  # turns whose lease cannot be taken back after a fault
        self.liveness = worker_db().liveness(
            worker_id=self.worker_id, wake=self.wake, stopped=self.stopped, released=self._release_dead
        )
        self.turns = 0

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> Worker:
        """Start the claim loop, heartbeat and (on PostgreSQL) the worker's own session in threads."""
        self._beat(first=True)
        if self.liveness is not None:
            threading.Thread(target=self._bound(self.liveness.run), name="runledger-liveness", daemon=True).start()
        for target, name in ((self._claim_loop, "claim"), (self._heartbeat_loop, "heartbeat")):
            thread = threading.Thread(target=self._bound(target), name=f"runledger-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _bound(self, target: Callable[..., None]) -> Callable[..., None]:
        """`target` with this worker's id in the log context of the thread that runs it."""

        def run(*args: Any) -> None:
            with logcontext.bind(worker=self.worker_id):
                target(*args)

        return run

    def stop(self, *, timeout: float = 60.0) -> bool:
        """Drain: claim nothing more; in-flight steps finish, then their instances are released.

        Returns True when every turn ended within `timeout`.
        """
        self.draining.set()
        self.wake.set()
        deadline = time.monotonic() + timeout
        # A claim already under way when the drain began still commits its leases: its turns
        # must reach the pool (and count as in flight below) before the pool shuts, or those
        # instances would stay leased to a stopped worker until their leases expire.
        for thread in self._threads:
            if thread.name == "runledger-claim":
                thread.join(max(0.0, deadline - time.monotonic()))
        while time.monotonic() < deadline:
            with self._lock:
                if not self._inflight:
                    break
            time.sleep(0.02)
        self.stopped.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(Exception), transaction.atomic():  # the page says "stopped", not "silent"
            sql_workers.worker_stopped(worker_id=self.worker_id, now=clock.now())
        for name, committer in (("group", commits.group), ("express", commits.express)):
            if committer.batches:
                log.info(
                    "worker %s stopped; this process committed %d writes in %d %s transactions (%.1f per commit)",
                    self.worker_id,
                    committer.writes,
                    committer.batches,
                    name,
                    committer.writes / committer.batches,
                )
        with self._lock:
            return not self._inflight

    @property
    def inflight(self) -> int:
        with self._lock:
            return len(self._inflight)

    # ---- claiming --------------------------------------------------------------------------

    def _claim_loop(self) -> None:
        failures = 0
        while not self.draining.is_set():
            if self.liveness is not None and not self.liveness.connected.wait(self.poll):
                continue  # its session is away: a lease taken now could not be told alive
            before = self._claimed_at
            try:
                claimed = self._claim_once()
                # A full house (None) has waited for a slot already: claim again at once, with
                # no lookup of the next wake-up (one round trip per freed slot, and its wait).
                if claimed == 0:
                    self._idle_wait(since=self._claimed_at)
            except Exception as exc:  # noqa: BLE001 - a lost connection must not kill the worker
                failures += 1
                self._claim_failed(exc, failures)
                continue
            if failures and self._claimed_at is not before:  # a claim ran (not only a full house)
                log.warning(
                    "worker %s: claims work again after %d failure(s)", self.worker_id, self._claim_failures.recovered()
                )
                failures = 0
        close_old_connections()
        self._close_claim_connection()

    def _claim_failed(self, exc: Exception, failures: int) -> None:
        shout, count = self._claim_failures.failed(now=time.monotonic(), reason=first_line(exc))
        if shout:
            log.warning(
                "worker %s: claiming failed (%s); retrying with backoff (%d failure(s) so far)",
                self.worker_id,
                first_line(exc),
                count,
                exc_info=count == 1,
            )
        close_old_connections()
        connection.close()
        self._close_claim_connection()
        # Woken early when the worker's session is back (liveness.py): claim at once then.
        self.wake.wait(BACKOFF.delay(failures))
        self.wake.clear()

    def _claim_connection(self) -> Any:
        """The claim loop's own engine connection (sql/base.py's engine_connection), on PostgreSQL."""
        self._claim_conn, self._claim_epoch = worker_db().claim_connection(
            self._claim_conn, self._claim_epoch, self._close_claim_connection
        )
        return self._claim_conn

    def _close_claim_connection(self) -> None:
        conn, self._claim_conn = self._claim_conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _claim_once(self) -> int | None:
        """Claim for the free slots; the number claimed, or None when none was free (it waited
        for one to free up, up to a poll, and claimed nothing)."""
        with self._lock:
            free = self.concurrency - len(self._inflight) + len(self._ending)
        if free <= 0:
            self.wake.wait(self.poll)
            self.wake.clear()
            return None
        pg.replace_stale_connection()
        self._claimed_at = clock.now()
        token, claimed = claim(
            worker_id=self.worker_id,
            limit=free,
            lease=self.lease,
            now=self._claimed_at,
            raw=self._claim_connection(),
            tied=self._tied(),
        )
        for c in claimed:
            with self._lock:
                self._inflight[c.id] = token
            future = self._pool.submit(self._bound(self._run), c, token)
            future.add_done_callback(self._done)
        return len(claimed)

    def _idle_wait(self, *, since: datetime) -> None:
        # Due times are looked up after `since`, the instant the empty claim looked at: an
        # instance that fell due in between is found (and waited for 0 s), not skipped until
        # the next poll.
        due = sql_lease.next_due(now=since)
        now = clock.now()
        wait = self.poll if due is None else min(self.poll, max(0.0, (due - now).total_seconds()))
        if wait > 0:
            self.wake.wait(wait)
        self.wake.clear()

    def _tied(self) -> bool:
        return self.liveness is not None and self.liveness.tied

    def _run(self, claimed: Claimed, token: str) -> None:
        instance_id = claimed.id
        current: Claimed | None = claimed
        try:
            for strike in range(1, STRIKES + 1):
                pg.replace_stale_connection()
                drop_broken_connection()
                try:
                    status = run_turn(
                        instance_id,
                        token=token,
                        worker_id=self.worker_id,
                        lease=self.lease,
                        draining=self.draining,
                        claimed=current,
                        ending=functools.partial(self._turn_ending, instance_id),
                    )
                except (EngineFault, DatabaseError) as exc:  # before the turn could start: its reads
                    log.debug("worker %s: turn of %s failed on the database: %s", self.worker_id, instance_id, exc)
                    status = TurnEnd.FAULT
                if status != TurnEnd.FAULT:
                    return
                renewed = self._renew_after_fault(instance_id, token) if strike < STRIKES else None
                if renewed is None:
                    return
                token, current = renewed, None  # the retry reads the instance as it is now
            log.error(
                "worker %s: the turn of %s failed on the database %d times in a row; leaving it to its lease",
                self.worker_id,
                instance_id,
                STRIKES,
            )
        except Exception:  # noqa: BLE001 - the lease expires and another turn retries it
            log.exception("worker %s: turn of %s failed inside the engine", self.worker_id, instance_id)
        finally:
            with self._lock:
                self._inflight.pop(instance_id, None)
                self._ending.discard(instance_id)
                self.turns += 1

    def _renew_after_fault(self, instance_id: str, token: str) -> str | None:
        """A write of the turn failed on the database, and this worker still holds the lease:
        retry the turn here as soon as the database answers, not when the lease expires. The
        lease gets a new token first, which fences off the failed turn's writes still in flight
        (and the group commit refuses a turn's writes once one has failed). Returns the token,
        or None to give the turn up (the worker drains, or the instance is no longer its own)."""
        with self._lock:
            self._ending.discard(instance_id)  # its slot is busy again
        failures = 0
        while not self.draining.is_set():
            failures += 1
            connection.close()  # this thread's: the next try opens a new session
            if self.stopped.wait(BACKOFF.delay(failures)):
                return None
            new = lease_token(tied=self._tied())
            try:
                held = sql_liveness.renew(
                    instance_id=instance_id,
                    owner=self.worker_id,
                    token=token,
                    new_token=new,
                    lease_until=clock.now() + self.lease,
                )
            except DatabaseError as exc:  # still away, or read-only: say so once per cause
                shout, count = self._renew_failures.failed(now=time.monotonic(), reason=first_line(exc))
                if shout:
                    log.warning(
                        "worker %s: cannot take back the lease of %s after its turn failed (%s); "
                        "retrying with backoff (%d failure(s) so far)",
                        self.worker_id,
                        instance_id,
                        first_line(exc),
                        count,
                    )
                continue
            self._renew_failures.recovered()
            if not held:
                return None
            with self._lock:
                if instance_id in self._inflight:
                    self._inflight[instance_id] = new  # the heartbeat's
            return new
        return None

    def _turn_ending(self, instance_id: str) -> None:
        if self.draining.is_set():
            return
        with self._lock:
            if instance_id in self._inflight:
                self._ending.add(instance_id)
        self.wake.set()

    def _done(self, future: Future[Any]) -> None:
        self.wake.set()

    # ---- heartbeat and notifications -------------------------------------------------------

    def _beat(self, *, first: bool = False) -> None:
        """The workers page's row for this process. Never in the way of the leases: a failed beat
        is only logged (the lease heartbeat right after it reports the database's state)."""
        try:
            now = clock.now()
            with transaction.atomic():  # a savepoint when the caller (a test) holds a transaction
                if first:
                    sql_workers.workers_forget(now=now)
                sql_workers.worker_beat(
                    worker_id=self.worker_id,
                    host=socket.gethostname(),
                    pid=os.getpid(),
                    slots=self.concurrency,
                    now=now,
                )
        except Exception as exc:  # noqa: BLE001 - the page's row must never stop a worker
            log.debug("worker %s: its heartbeat row was not written (%s)", self.worker_id, first_line(exc))
            if not first:  # the heartbeat thread's own connection; never the caller's
                connection.close()

    def _heartbeat_loop(self) -> None:
        interval = max(0.2, self.lease.total_seconds() / 3)
        wait, failures = interval, 0
        while not self.stopped.wait(wait):
            wait = interval
            self._sweep()
            self._beat()
            with self._lock:
                tokens = dict(self._inflight)
            if not tokens:
                continue
            try:
                pg.replace_stale_connection()
                with transaction.atomic():
                    held = sql_lease.heartbeat(
                        owner=self.worker_id, tokens=tokens, lease_until=clock.now() + self.lease
                    )
            except Exception as exc:  # noqa: BLE001 - retried soon: the leases must not lapse meanwhile
                failures += 1
                shout, count = self._beat_failures.failed(now=time.monotonic(), reason=first_line(exc))
                if shout:
                    log.warning(
                        "worker %s: heartbeat failed (%s); retrying (%d failure(s) so far)",
                        self.worker_id,
                        first_line(exc),
                        count,
                    )
                connection.close()
                wait = min(interval, BACKOFF.delay(failures))
                continue
            if failures:
                self._beat_failures.recovered()
                failures = 0
            lost = set(tokens) - set(held)
            if lost:
                # Turns that ended between the snapshot and the update show up here too: debug only.
                log.debug("worker %s: no longer holds %s", self.worker_id, ", ".join(sorted(lost)))
        close_old_connections()

    def _release_dead(self, ids: list[int]) -> None:
        """Give back what dead workers' attempts held (their ids, read as their leases were taken),
        then sweep for any other orphan."""
        if ids:
            try:
                reservations_release(ids=ids)
            except Exception as exc:  # noqa: BLE001 - the heartbeat's sweep finds them once their instances end
                log.warning(
                    "worker %s: could not release dead workers' budget reservations (%s)",
                    self.worker_id,
                    first_line(exc),
                )
                connection.close()
        self._sweep()

    def _sweep(self) -> None:
        """Give back money held by attempts that can no longer finish (costs/budgets.py)."""
        try:
            reservations_release_orphaned(now=clock.now())
        except Exception as exc:  # noqa: BLE001 - tried again at the next heartbeat
            shout, count = self._beat_failures.failed(now=time.monotonic())
            if shout:
                log.warning(
                    "worker %s: could not release orphaned budget reservations (%s; %d failure(s))",
                    self.worker_id,
                    first_line(exc),
                    count,
                )
            connection.close()
