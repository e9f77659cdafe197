"""Workers: claim runnable instances under a lease, run one turn each, release them.

A worker holds a thread only for an instance that is executing a turn. Sleeping, waiting and
backing-off instances are rows with a `ready_at`; the worker finds them again when they are
due. On PostgreSQL, any number of workers on any number of machines share one database (claims
use SKIP LOCKED; LISTEN/NOTIFY wakes idle workers at once). On SQLite one worker process runs.
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
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction

from ingest.engine import clock
from ingest.engine.sql import channels
from ingest.engine.sql import lease as sql_lease
from ingest.engine.sql.base import drop_broken_connection, engine_connection, is_postgres
from ingest.engine.sql.claim import Claimed
from ingest.engine.worker.turns import claim, run_turn
from ingest.engine.writes import commits

log = logging.getLogger("runledger.engine")


class Worker:
    """Runs up to `concurrency` instances at once, in threads of this process."""

    def __init__(self, *, concurrency: int = 8, worker_id: str | None = None,
                 lease_seconds: float | None = None, poll_seconds: float | None = None) -> None:
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
        self.turns = 0

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> Worker:
        """Start the claim loop, heartbeat and (on PostgreSQL) the NOTIFY listener in threads."""
        for target, name in ((self._claim_loop, "claim"), (self._heartbeat_loop, "heartbeat")):
            thread = threading.Thread(target=target, name=f"runledger-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        if is_postgres():
            thread = threading.Thread(target=self._listen_loop, name="runledger-listen", daemon=True)
            thread.start()
        return self

    def stop(self, *, timeout: float = 60.0) -> bool:
        """Drain: claim nothing more; in-flight steps finish, then their instances are released.

        Returns True when every turn ended within `timeout`.
        """
        self.draining.set()
        self.wake.set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._inflight:
                    break
            time.sleep(0.02)
        self.stopped.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        for name, committer in (("group", commits.group), ("express", commits.express)):
            if committer.batches:
                log.info("worker %s stopped; this process committed %d writes in %d %s transactions "
                         "(%.1f per commit)", self.worker_id, committer.writes, committer.batches, name,
                         committer.writes / committer.batches)
        with self._lock:
            return not self._inflight

    @property
    def inflight(self) -> int:
        with self._lock:
            return len(self._inflight)

    # ---- claiming --------------------------------------------------------------------------

    def _claim_loop(self) -> None:
        while not self.draining.is_set():
            try:
                claimed = self._claim_once()
            except Exception:  # noqa: BLE001 - a lost connection must not kill the worker
                log.exception("worker %s: claim failed; retrying", self.worker_id)
                close_old_connections()
                connection.close()
                self._close_claim_connection()
                time.sleep(min(self.poll, 1.0))
                continue
            if claimed:
                continue
            self._idle_wait(since=self._claimed_at)
        close_old_connections()
        self._close_claim_connection()

    def _claim_connection(self) -> Any:
        """The claim loop's own engine connection (sql/base.py's engine_connection), on PostgreSQL."""
        if not is_postgres():
            return None
        if self._claim_conn is None or self._claim_conn.closed or self._claim_conn.broken:
            self._claim_conn = engine_connection()
        return self._claim_conn

    def _close_claim_connection(self) -> None:
        conn, self._claim_conn = self._claim_conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _claim_once(self) -> int:
        with self._lock:
            free = self.concurrency - len(self._inflight) + len(self._ending)
        if free <= 0:
            self.wake.wait(self.poll)
            self.wake.clear()
            return 0
        self._claimed_at = clock.now()
        token, claimed = claim(worker_id=self.worker_id, limit=free, lease=self.lease, now=self._claimed_at,
                               raw=self._claim_connection())
        for c in claimed:
            with self._lock:
                self._inflight[c.id] = token
            future = self._pool.submit(self._run, c, token)
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

    def _run(self, claimed: Claimed, token: str) -> None:
        instance_id = claimed.id
        try:
            drop_broken_connection()
            run_turn(instance_id, token=token, worker_id=self.worker_id, lease=self.lease, draining=self.draining,
                     claimed=claimed, ending=functools.partial(self._turn_ending, instance_id))
        except Exception:  # noqa: BLE001 - the lease expires and another turn retries it
            log.exception("worker %s: turn of %s failed inside the engine", self.worker_id, instance_id)
        finally:
            with self._lock:
                self._inflight.pop(instance_id, None)
                self._ending.discard(instance_id)
                self.turns += 1

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

    def _heartbeat_loop(self) -> None:
        interval = max(0.2, self.lease.total_seconds() / 3)
        while not self.stopped.wait(interval):
            with self._lock:
                tokens = dict(self._inflight)
            if not tokens:
                continue
            try:
                with transaction.atomic():
                    held = sql_lease.heartbeat(owner=self.worker_id, tokens=tokens, lease_until=clock.now() + self.lease)
            except Exception:  # noqa: BLE001
                log.exception("worker %s: heartbeat failed", self.worker_id)
                connection.close()
                continue
            lost = set(tokens) - set(held)
            if lost:
                # Turns that ended between the snapshot and the update show up here too: debug only.
                log.debug("worker %s: no longer holds %s", self.worker_id, ", ".join(sorted(lost)))
        close_old_connections()

    def _listen_loop(self) -> None:
        """LISTEN on its own connection; any NOTIFY wakes the claim loop at once."""
        import psycopg

        from ingest.engine.pg import connection_string

        while not self.stopped.is_set():
            try:
                with psycopg.connect(connection_string(), autocommit=True) as conn:
                    channels.listen(conn, channels.READY_CHANNEL)
                    while not self.stopped.is_set():
                        for _ in conn.notifies(timeout=1.0, stop_after=1):
                            self.wake.set()
            except Exception:  # noqa: BLE001 - polling covers the gap; reconnect shortly
                log.warning("worker %s: LISTEN connection lost; polling until it is back", self.worker_id)
                time.sleep(1.0)
