"""A scriptable local HTTP server: the base of the fake Gong, Salesforce and LLM servers.

Each fake registers routes ("GET /v2/calls" → handler). Tests script a route by pushing
planned responses onto its queue with `plan(...)`: queued responses are served first, in
order, then the route's real handler answers again. Every request is recorded.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Planned:
    """A response: dict/list bodies are sent as JSON, str/bytes as they are."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class Recorded:
    route: str
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when the request arrived

    def json(self) -> Any:
        return json.loads(self.body or b"null")

    def form(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(self.body.decode()).items()}

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


Handler = Callable[[Recorded, re.Match[str]], Planned]


class FakeServer:
    """ThreadingHTTPServer on 127.0.0.1, port 0, in a daemon thread."""

    def __init__(self) -> None:
        self._routes: list[tuple[str, str, re.Pattern[str], Handler]] = []
        self._plans: dict[str, deque[Planned]] = {}
        self._lock = threading.Lock()
        self.requests: list[Recorded] = []
        self.delay = 0.0  # every answer's time from the request's arrival, for benchmarks
        self._httpd: ThreadingHTTPServer | None = None

    def route(self, method: str, pattern: str, handler: Handler) -> None:
        name = f"{method} {pattern}"
        self._routes.append((name, method, re.compile(pattern), handler))
        self._plans.setdefault(name, deque())

    def plan(self, route: str, *responses: Planned) -> None:
        """Queue responses for a route (its name is "METHOD pattern", e.g. "GET /v2/calls")."""
        if route not in self._plans:
            raise KeyError(f"no route {route!r}; routes: {sorted(self._plans)}")
        with self._lock:
            self._plans[route].extend(responses)

    def count(self, route: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if route is None or r.route == route)

    def requests_to(self, route: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.route == route]

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start the fake server first"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        self._httpd = _Server(("127.0.0.1", 0), _handler_class(self))
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def respond(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> Planned:
        parts = urlsplit(raw_path)
        for name, route_method, pattern, handler in self._routes:
            match = pattern.fullmatch(parts.path)
            if route_method != method or match is None:
                continue
            request = Recorded(name, method, parts.path, parse_qs(parts.query), headers, body, time.monotonic())
            with self._lock:
                self.requests.append(request)
                planned = self._plans[name].popleft() if self._plans[name] else None
            return planned or handler(request, match)
        return Planned(404, {"error": f"fake server has no route for {method} {parts.path}"})


class _Server(ThreadingHTTPServer):
    # A listen backlog of 128, as production servers have: the standard library's 5 overflowed
    # when a benchmark's 16 clients connected at once, and a connection dropped from a full
    # accept queue was reset by the kernel.
    request_queue_size = 128


def _handler_class(server: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # TCP_NODELAY, as every production HTTP server sets it: the status line and headers
        # go out in one write and the body in another, and with Nagle's algorithm on the body
        # waited for the client's delayed ACK of the headers, 40 ms on every keep-alive request.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            arrived = time.monotonic()
            planned = server.respond(self.command, self.path, dict(self.headers), body)
            payload = planned.body
            if isinstance(payload, (dict, list)):
                data, ctype = json.dumps(payload).encode(), "application/json"
            elif isinstance(payload, str):
                data, ctype = payload.encode(), "text/plain; charset=utf-8"
            else:
                data, ctype = payload or b"", "application/octet-stream"
            if planned.delay or server.delay:
                # The delay is the answer time counted from the request's arrival, as a remote
                # API's latency would be: the fake's own work (the LLM fake runs the rule
                # extractor) is part of it, not added to it.
                time.sleep(max(0.0, arrived + planned.delay + server.delay - time.monotonic()))
            self.send_response(planned.status)
            headers = {"Content-Type": ctype, **planned.headers, "Content-Length": str(len(data))}
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    return Handler
