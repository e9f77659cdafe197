"""The history follower: one per web process, started lazily by the first websocket.

It reads new History rows (ids ascending, re-checking recent holes: see feed.py) and sends one
`history.batch` message per group (tenant and instance) per read. On PostgreSQL it sleeps on
LISTEN runledger_history (the engine NOTIFYs on commit) with a 1 s safety poll; elsewhere it polls
every RUNLEDGER_LIVE_POLL_SECONDS (0.15 s). No Redis needed: every web process follows the table
itself; with channels-redis each consumer drops ids it has already seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypedDict

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import close_old_connections, connection, connections
from django.db.models import Max, Q

from dashboard.live.feed import FeedState, feed_advance
from dashboard.live.groups import instance_group, tenant_group
from ingest.engine import ByVendor
from ingest.engine.models import History

log = logging.getLogger("runledger.live")
CHANNEL = "runledger_history"
READ_LIMIT = 2000
SAFETY_POLL_SECONDS = 1.0  # with LISTEN: re-read this often anyway (holes, a lost connection)
# Reads are at least this far apart. Every commit NOTIFYs, so a busy PostgreSQL would otherwise
# wake the follower hundreds of times a second and send each socket as many messages; the
# in-memory channel layer holds 100 per channel and drops the rest. Coalescing commits into one
# read per 50 ms bounds what a group receives at 20 messages a second, whatever the write rate,
# for at most 50 ms of added latency.
MIN_READ_GAP_SECONDS = 0.05


class ChangeMsg(TypedDict):
    id: int
    instance_id: str | None
    tenant: str
    kind: str
    status: str
    step_name: str  # `name`, or `name#2` for a step's second call (the engine's history label)


class BatchMsg(TypedDict):
    type: str  # "history.batch" -> LiveConsumer.history_batch
    changes: list[ChangeMsg]


# Whether the engine NOTIFYs CHANNEL when history commits: PostgreSQL's LISTEN/NOTIFY; SQLite has none.
_NOTIFIED = ByVendor[bool](postgresql=True, sqlite=False)

# A thread of its own keeps one database connection for the follower's whole life and never
# queues behind page renders on the shared sync thread.
_EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="runledger-follower")


def _db(fn: Any) -> Any:
    return sync_to_async(fn, thread_sensitive=False, executor=_EXECUTOR)


def read_max_id() -> int:
    return History.objects.aggregate(m=Max("id"))["m"] or 0


def read_after(state: FeedState) -> list[ChangeMsg]:
    q = Q(id__gt=state.cursor)
    if state.gaps:
        q |= Q(id__in=list(state.gaps))
    rows = (
        History.objects.filter(q)
        .order_by("id")
        .values_list("id", "instance_id", "tenant", "kind", "status", "step_name")[:READ_LIMIT]
    )
    return [ChangeMsg(id=r[0], instance_id=r[1], tenant=r[2], kind=r[3], status=r[4], step_name=r[5]) for r in rows]


def batches_by_group(changes: list[ChangeMsg]) -> dict[str, list[ChangeMsg]]:
    groups: dict[str, list[ChangeMsg]] = defaultdict(list)
    for c in changes:
        if c["tenant"]:
            groups[tenant_group(c["tenant"])].append(c)
        if c["instance_id"]:
            groups[instance_group(c["instance_id"])].append(c)
    return groups


class HistoryFollower:
    def __init__(self, *, poll_seconds: float | None = None) -> None:
        self.poll_seconds = poll_seconds or float(getattr(settings, "RUNLEDGER_LIVE_POLL_SECONDS", 0.15))
        self.state: FeedState | None = None
        self.task: asyncio.Task[None] | None = None
        self.last_read = 0.0

    async def poll_once(self) -> int:
        """Read what is new and fan it out; returns how many rows were sent."""
        wait = self.last_read + MIN_READ_GAP_SECONDS - time.monotonic()
        if wait > 0:  # commits that arrive meanwhile ride on this read (see MIN_READ_GAP_SECONDS)
            await asyncio.sleep(wait)
        self.last_read = time.monotonic()
        if self.state is None:
            self.state = FeedState(cursor=await _db(read_max_id)())
        state = self.state
        rows = await _db(read_after)(state)
        self.state, fresh = feed_advance(state, [r["id"] for r in rows], now=time.monotonic())
        fresh_ids = set(fresh)
        changes = [r for r in rows if r["id"] in fresh_ids]
        if changes:
            layer = get_channel_layer()
            for group, items in batches_by_group(changes).items():
                await layer.group_send(group, BatchMsg(type="history.batch", changes=items))
        return len(changes)

    async def run(self) -> None:
        listen = _NOTIFIED() and getattr(settings, "RUNLEDGER_LIVE_LISTEN", True)
        while True:
            try:
                if listen:
                    await self._run_listen()
                else:
                    await self.poll_once()
                    await asyncio.sleep(self.poll_seconds)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("history follower failed; retrying in 1 s")
                await _db(close_old_connections)()
                await asyncio.sleep(1.0)

    async def _run_listen(self) -> None:
        import psycopg

        params = connection.get_connection_params()
        keep = {
            k: v for k, v in params.items() if k in {"dbname", "user", "password", "host", "port", "sslmode", "options"}
        }
        async with await psycopg.AsyncConnection.connect(**keep, autocommit=True) as conn:
            await conn.execute(f"LISTEN {CHANNEL}")
            await self.poll_once()
            while True:
                # Wake on the first NOTIFY, or after SAFETY_POLL_SECONDS to re-check holes (feed.py).
                async for _ in conn.notifies(timeout=SAFETY_POLL_SECONDS, stop_after=1):
                    pass
                await self.poll_once()

    def ensure_started(self) -> None:
        loop = asyncio.get_running_loop()
        if self.task is None or self.task.done() or self.task.get_loop() is not loop:
            self.task = loop.create_task(self.run(), name="runledger-history-follower")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
            self.task = None
        await close_follower_connections()


_follower: HistoryFollower | None = None


def get_follower() -> HistoryFollower:
    global _follower
    if _follower is None:
        _follower = HistoryFollower()
    return _follower


def ensure_follower_started() -> None:
    """Start this process's follower on the running event loop (daphne's) if not running."""
    if getattr(settings, "RUNLEDGER_LIVE_FOLLOWER", True):
        get_follower().ensure_started()


async def close_follower_connections() -> None:
    """Close the database connection the follower's thread holds (process shutdown, tests)."""
    await _db(connections.close_all)()
