"""A webhook receiver on 127.0.0.1 that verifies Runledger's signature as a customer would:
`X-Runledger-Timestamp` and `X-Runledger-Signature` over the raw body, with the shared secret.

Every request is kept with whether its signature held; `fail_next(n, status)` answers the next
n requests with an error (a receiver that is down for a while).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from django.utils import timezone

from ingest.triggers.errors import TriggerError
from ingest.triggers.signing import verify


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    signed: bool  # the signature verified with the receiver's secret
    problem: str
    at: float  # time.time() on arrival

    def json(self) -> Any:
        return json.loads(self.body)


class WebhookReceiver:
    def __init__(self, *, secret: str | None = None) -> None:
        self.secret = secret
        self.received: list[Received] = []
        self._failures: list[int] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/hook"

    def fail_next(self, count: int, status: int = 503) -> None:
        with self._lock:
            self._failures.extend([status] * count)

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self._arrived:
            while len(self.received) < count and time.monotonic() < deadline:
                self._arrived.wait(deadline - time.monotonic())
            return list(self.received)

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in handler.headers.items()}
        signed, problem = False, "no secret"
        if self.secret is not None:
            try:
                verify(
                    secrets=[self.secret],
                    timestamp=headers.get("X-Runledger-Timestamp"),
                    signature=headers.get("X-Runledger-Signature"),
                    body=body,
                    now=timezone.now(),
                )
                signed, problem = True, ""
            except TriggerError as exc:
                problem = str(exc)
        with self._arrived:
            self.received.append(Received(handler.path, headers, body, signed, problem, time.time()))
            status = self._failures.pop(0) if self._failures else (200 if signed or self.secret is None else 401)
            self._arrived.notify_all()
        handler.send_response(status)
        handler.send_header("Content-Length", "2")
        handler.end_headers()
        handler.wfile.write(b"ok")

    def __enter__(self) -> Self:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's spelling
                receiver._handle(self)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
