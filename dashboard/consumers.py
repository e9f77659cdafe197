"""The dashboard's websocket: `/ws/live/?view=...&instance=<id>&after=<last_event_id>`.

Authenticated users only; subscribed to their own tenants' groups (or to one instance of theirs).
On connect it replays what the browser missed since `after` from the history table; the pages
read `after` before their data (dashboard/live/ops_pages.py, views/runs.py, selectors/
instance_detail.py), so a change made while a page was read is replayed, never skipped. Pushes are
throttled per socket: changes are coalesced and the page's fragments, rendered from the current
state, are sent at most every MIN_INTERVAL seconds, and never more often than RENDER_SHARE times
the last render took — a burst of 1,000 step events is a handful of messages, not 1,000.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from dashboard import selectors
from dashboard.live.follower import ensure_follower_started
from dashboard.live.render import (
    MIN_INTERVALS,
    Forbidden,
    Pending,
    Subscription,
    render_push,
    subscription_for,
)

log = logging.getLogger("runledger.live")
# At most 10 pushes a second per socket. A step that completes soon after the previous push (the
# next step's start, say) then waits at most 0.1 s for its own; at 0.25 s, as before, completions
# of steps a few tenths of a second long mostly waited out the throttle (bench/dashboard.py).
MIN_INTERVAL = 0.1
# ...and a page that is costly to render is pushed less often: the gap after a push is at least
# this many times its typical render (a moving average, so one slow render on a busy host does not
# hold back the next push), so one socket keeps the server rendering a third of the time at most
# however busy its instance is.
RENDER_SHARE = 3.0
RENDER_SMOOTHING = 0.3  # weight of the newest render in the average
RESUME_OVERLAP = 100  # ids re-read below `after`: a lower id may have committed after a higher one
SEEN_IDS = 5000


class LiveConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels ships no type hints
    sub: Subscription
    user: Any

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        self.pending = Pending()
        self.seen: deque[int] = deque(maxlen=SEEN_IDS)
        self.seen_set: set[int] = set()
        self.last_push = 0.0
        self.render_seconds: float | None = None  # moving average of this socket's renders
        self.flush_task: asyncio.Task[None] | None = None
        if self.user is None or not self.user.is_authenticated:
            await self.close(code=4401)
            return
        query = self.scope.get("query_string", b"").decode("latin-1")
        try:
            self.sub = await database_sync_to_async(subscription_for)(self.user, query)
        except Forbidden:
            await self.close(code=4403)
            return
        for group in self.sub.groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        ensure_follower_started()
        if self.sub.after is not None:
            missed = await database_sync_to_async(selectors.history_changes)(
                tenants=self.sub.tenants,
                instance_id=self.sub.instance_id,
                after=max(0, self.sub.after - RESUME_OVERLAP),
            )
            for change in missed:
                self._note(change.__dict__, replay=True)
            if any(c.id > self.sub.after for c in missed):
                await self.flush()

    async def disconnect(self, code: int) -> None:
        if self.flush_task is not None:
            self.flush_task.cancel()
        for group in getattr(self, "sub", Subscription("page", [], [], None)).groups:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The page sends nothing we act on; htmx's ws-send is not used."""

    # -- group messages ---------------------------------------------------------------------

    async def history_batch(self, event: dict[str, Any]) -> None:
        noted = False
        for change in event["changes"]:
            noted |= self._note(change)
        if noted:
            self._schedule()

    def _note(self, change: dict[str, Any], *, replay: bool = False) -> bool:
        cid = int(change["id"])
        if cid in self.seen_set:  # several followers (channels-redis) send the same row
            return False
        if len(self.seen) == self.seen.maxlen:
            self.seen_set.discard(self.seen[0])
        self.seen.append(cid)
        self.seen_set.add(cid)
        if replay and self.sub.after is not None and cid <= self.sub.after:
            # Already covered by the page, unless a late commit: still refresh what it touched.
            self.pending.note({**change, "id": 0})
            return True
        self.pending.note(change)
        return True

    def _schedule(self) -> None:
        if self.flush_task is not None and not self.flush_task.done():
            return
        loop = asyncio.get_running_loop()
        interval = max(MIN_INTERVALS.get(self.sub.view, MIN_INTERVAL), RENDER_SHARE * (self.render_seconds or 0.0))
        delay = max(0.0, self.last_push + interval - loop.time())
        self.flush_task = loop.create_task(self._flush_after(delay))

    async def _flush_after(self, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        try:
            await self.flush()
        except Exception:  # a failed render must not kill the socket; the next change retries
            log.exception("live push failed for %s", getattr(self, "sub", None))
        # A change that arrived while this render ran found this task still running and scheduled
        # nothing: it is pushed by the next flush, or it would wait for a change that may never come.
        self.flush_task = None
        if self.pending:
            self._schedule()

    async def flush(self) -> None:
        pending, self.pending = self.pending, Pending()
        loop = asyncio.get_running_loop()
        self.last_push = loop.time()
        if not pending:
            return
        messages = await database_sync_to_async(render_push)(self.user, self.sub, pending)
        took = loop.time() - self.last_push
        # The first render also loads templates and opens a connection: it says little.
        self.render_seconds = (
            0.0
            if self.render_seconds is None
            else self.render_seconds + RENDER_SMOOTHING * (took - self.render_seconds)
        )
        for html in messages:
            await self.send(text_data=html)
