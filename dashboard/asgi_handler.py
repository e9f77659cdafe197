"""The web process's Django HTTP handler: the project's middleware and views are synchronous, so a
request crosses from daphne's event loop into a thread once, and that thread is reused.

Django's own `ASGIHandler` builds the middleware chain for async (`load_middleware(is_async=True)`).
Every middleware here is synchronous, so Django wraps the outermost one in `sync_to_async`, then
the innermost one's call back into the event loop with `async_to_sync` (to resolve the URL), then
the view in `sync_to_async` again: three crossings per request where one does. And each request
runs its synchronous code in a `ThreadSensitiveContext` of its own, which starts a new thread for
the request and another one to join it at the end. In the no-op ceiling of bench/ingress.py the
crossings and the two threads were most of the web CPU a request cost.

`RequestHandler` keeps Django's request handling (body, signals, disconnects, response streaming)
and changes only those two things:

- the middleware chain is built synchronously, and `get_response_async` runs Django's synchronous
  `get_response` (URL conf, chain, resource closers, the 4xx/5xx log line) in one `sync_to_async`;
- the request's thread-sensitive context runs on a single-thread executor borrowed from a free
  list and given back afterwards, instead of a thread started and joined per request.

What stays as before: all of a request's synchronous code — `request_started` (which checks the
thread's database connection), the middleware, the view, `response.close()` and
`request_finished` (which hands the connection back to the pool) — runs on one thread, the
borrowed executor's only one, and two requests never share it at the same time. A view that
outlives its request (a client that disconnected while a sync view ran) keeps its executor busy;
the executor goes back to the free list and the next request borrowing it waits for that view,
as it would for any thread.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponseBase

IDLE_THREADS = 64  # executors kept between requests; a burst past this many starts (and ends) its own


class ExecutorPool:
    """Single-thread executors lent to one request at a time. Used from the event loop's thread
    only (borrow and give back are not called from the request threads)."""

    def __init__(self, idle: int = IDLE_THREADS) -> None:
        self.idle = idle
        self._free: deque[ThreadPoolExecutor] = deque()

    def borrow(self) -> ThreadPoolExecutor:
        try:
            return self._free.pop()  # the most recently used: its thread and connection are warm
        except IndexError:
            return ThreadPoolExecutor(max_workers=1, thread_name_prefix="runledger-request")

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        if len(self._free) < self.idle:
            self._free.append(executor)
        else:
            executor.shutdown(wait=False)

    def __len__(self) -> int:
        return len(self._free)


class RequestHandler(ASGIHandler):
    """Django's ASGI handler for a synchronous middleware chain (see the module's docstring)."""

    def __init__(self, executors: ExecutorPool | None = None) -> None:
        # Not ASGIHandler.__init__: it builds the chain for async.
        super(ASGIHandler, self).__init__()
        self.load_middleware(is_async=False)
        self.executors = executors if executors is not None else ExecutorPool()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self.executors.borrow()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self.executors.give_back(executor)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        response: HttpResponseBase = await sync_to_async(self.get_response, thread_sensitive=True)(request)
        return response
