"""Workers: claim runnable instances under a lease, run one turn each, release them.

A worker holds a thread only for an instance that is executing a turn. Sleeping, waiting and
backing-off instances are rows with a `ready_at`; the worker finds them again when they are
due. On PostgreSQL, any number of workers on any number of machines share one database (claims
use SKIP LOCKED; LISTEN/NOTIFY wakes idle workers at once). On SQLite one worker process runs.
"""

from __future__ import annotations

import contextlib
import functools
import json
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
from django.db import close_old_connections, connection, transaction

from ingest.engine import clock, flow, notify, sql
from ingest.engine.models import History, HistoryKind, Instance, Status
from ingest.engine.runtime import Execution
from ingest.engine.steps import AsyncStep, Step
from ingest.engine.store import InstanceStore
from ingest.engine.workflow import registered_workflows

log = logging.getLogger("runledger.engine")


def drop_broken_connection() -> None:
    """Keep this thread's connection across turns (a new PostgreSQL backend per turn costs more
    than the turn), unless an error left it unusable."""
    if connection.connection is not None and connection.errors_occurred and not connection.is_usable():
        connection.close()


def _make_step(execution: Execution, is_async: bool) -> Step:
    return AsyncStep(execution) if is_async else Step(execution)


def run_turn(instance_id: str, *, token: str, worker_id: str, lease: timedelta,
             draining: threading.Event, claimed: sql.Claimed | None = None,
             ending: Callable[[], None] | None = None) -> str:
    """Run one turn of a claimed instance. Returns the status it was left in. `claimed`: what the
    claim returned of it; when that holds its row, the turn does not read the row again, nor its
    steps when it has none. `ending`: called when only the turn's last write is left."""
    if claimed is not None and claimed.row is not None:
        inst = _instance_from_row(claimed.row)
    else:
        inst = load_instance(instance_id)
    store = InstanceStore(instance_id=inst.id, token=token, worker=worker_id, workflow=inst.workflow,
                          tenant=inst.tenant, lease=lease, control=inst.control)
    has_steps = claimed is None or claimed.row is None or claimed.has_steps
    return Execution(instance=inst, store=store, draining=draining, has_steps=has_steps,
                     ending=ending).run_turn(_make_step)


_COLUMNS = [f.attname for f in Instance._meta.concrete_fields]
_JSON_COLUMNS = {i for i, f in enumerate(Instance._meta.concrete_fields) if f.get_internal_type() == "JSONField"}


def load_instance(instance_id: str) -> Instance:
    """The claimed instance's row: on PostgreSQL a prepared statement (every turn starts here)."""
    if not sql.is_postgres():
        return Instance.objects.get(id=instance_id)
    row = sql.instance_row(instance_id, _COLUMNS)
    if row is None:
        raise Instance.DoesNotExist(instance_id)
    return _instance_from_row(row)


def _instance_from_row(row: tuple[Any, ...]) -> Instance:
    values = [json.loads(v) if i in _JSON_COLUMNS and v is not None else v for i, v in enumerate(row)]
    return Instance.from_db(connection.alias, _COLUMNS, values)


def claim_batch(*, worker_id: str, limit: int, lease: timedelta, now: datetime | None = None) -> tuple[str, list[str]]:
    """Lease up to `limit` runnable instances; record their move to running in the history."""
    token, claimed = claim(worker_id=worker_id, limit=limit, lease=lease, now=now)
    return token, [c.id for c in claimed]


def claim(*, worker_id: str, limit: int, lease: timedelta, now: datetime | None = None,
          raw: Any = None) -> tuple[str, list[sql.Claimed]]:
    """claim_batch, returning what the claim knows of each instance (on PostgreSQL without flow
    limits: its row, so the turn starts without reading it). `raw`: the claiming thread's own
    sql.engine_connection(), for that claim."""
    now = now or clock.now()
    token = secrets.token_hex(8)
    if sql.is_postgres() and not flow.claim_limits(registered_workflows(), now=now):
        claimed = sql.claim_and_record(owner=worker_id, token=token, limit=limit, now=now,
                                       lease_until=now + lease, columns=_COLUMNS, raw=raw)
        if any(c.previous_status in (Status.QUEUED, Status.WAITING) for c in claimed):
            notify.request_history()  # committed already: the statement was its own transaction
        return token, claimed
    with transaction.atomic():
        claimed = sql.claim(owner=worker_id, token=token, limit=limit, now=now, lease_until=now + lease)
        moved = [c for c in claimed if c.previous_status in (Status.QUEUED, Status.WAITING)]
        if moved:
            notify.history()
            if all(c.workflow for c in moved):
                sql.history_running(claimed=moved, now=now)
            else:  # SQLite: the claim did not return them
                rows = Instance.objects.filter(id__in=[c.id for c in moved]).values_list("id", "workflow", "tenant")
                History.objects.bulk_create([
                    History(instance_id=i, workflow=w, tenant=t, kind=HistoryKind.INSTANCE_STATUS,
                            status=Status.RUNNING, created_at=now)
                    for i, w, t in rows
                ])
    return token, claimed


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
        if sql.is_postgres():
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
        from ingest.engine.commits import express, group

        for name, commits in (("group", group), ("express", express)):
            if commits.batches:
                log.info("worker %s stopped; this process committed %d writes in %d %s transactions "
                         "(%.1f per commit)", self.worker_id, commits.writes, commits.batches, name,
                         commits.writes / commits.batches)
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
        """The claim loop's own engine connection (sql.engine_connection), on PostgreSQL."""
        if not sql.is_postgres():
            return None
        if self._claim_conn is None or self._claim_conn.closed or self._claim_conn.broken:
            self._claim_conn = sql.engine_connection()
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
        due = sql.next_due(now=since)
        now = clock.now()
        wait = self.poll if due is None else min(self.poll, max(0.0, (due - now).total_seconds()))
        if wait > 0:
            self.wake.wait(wait)
        self.wake.clear()

    def _run(self, claimed: sql.Claimed, token: str) -> None:
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
                    held = sql.heartbeat(owner=self.worker_id, tokens=tokens, lease_until=clock.now() + self.lease)
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
                    conn.execute(f"LISTEN {sql.READY_CHANNEL}")
                    while not self.stopped.is_set():
                        for _ in conn.notifies(timeout=1.0, stop_after=1):
                            self.wake.set()
            except Exception:  # noqa: BLE001 - polling covers the gap; reconnect shortly
                log.warning("worker %s: LISTEN connection lost; polling until it is back", self.worker_id)
                time.sleep(1.0)


def run_until_idle(*, max_turns: int = 10_000, advance_clock: bool = False, worker_id: str = "inline",
                   lease_seconds: float = 86_400.0) -> int:
    """Run every runnable instance in this thread until none is due (tests and scripts).

    With `advance_clock`, jump the engine's clock to the next wake-up whenever nothing is due,
    so sleeps and retry delays pass instantly. Returns the number of turns run. The lease is a
    day long: no heartbeat runs here, and tests move the clock inside steps.
    """
    lease = timedelta(seconds=lease_seconds)
    draining = threading.Event()
    turns = 0
    while turns < max_turns:
        claimed_at = clock.now()
        token, claimed = claim(worker_id=worker_id, limit=1, lease=lease, now=claimed_at)
        if not claimed:
            # Looked up after the claim's own instant, so one that fell due since is not missed.
            due = sql.next_due(now=claimed_at)
            if due is None:
                return turns
            if due > clock.now():
                if not advance_clock:
                    return turns
                clock.clock.advance(due - clock.now() + timedelta(microseconds=1))
            continue
        run_turn(claimed[0].id, token=token, worker_id=worker_id, lease=lease, draining=draining, claimed=claimed[0])
        turns += 1
    return turns
