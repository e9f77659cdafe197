"""Shared test support for triggers and API tests: workflows, signed requests, personas."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection
from django.test import Client
from django.utils import timezone

from ingest.engine import Workflow
from ingest.triggers import signing


class Echo(Workflow):
    name = "test-echo"

    def run(self, event: Any, step: Any) -> Any:
        return step.do("echo", lambda ctx: {"got": event.payload})


class Sleeper(Workflow):
    name = "test-sleeper"

    def run(self, event: Any, step: Any) -> Any:
        step.sleep("nap", "1 hour")
        return {"woke": True}


class Waiter(Workflow):
    name = "test-waiter"

    def run(self, event: Any, step: Any) -> Any:
        return step.wait_for_event("wait", type="go", timeout="1 hour")


def signed_post(
    client: Client,
    route: str,
    body: bytes | dict[str, Any],
    *,
    token: str | None,
    secret: str,
    key: str | None = None,
    wait: str | None = None,
    ts: int | None = None,
    signature: str | None = None,
) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    stamp = str(ts if ts is not None else int(timezone.now().timestamp()))
    headers = {
        "X-Runledger-Timestamp": stamp,
        "X-Runledger-Signature": signature or signing.sign(secret=secret, timestamp=stamp, body=raw),
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if key is not None:
        headers["Idempotency-Key"] = key
    path = f"/api/routes/{route}" + (f"?wait={wait}" if wait is not None else "")
    return client.post(path, data=raw, content_type="application/json", headers=headers)


@contextmanager
def worker_thread(seconds: float = 10.0) -> Iterator[None]:
    """Drain runnable instances in a background thread (its own DB connection) while inside."""
    from ingest.engine.worker.turns import run_until_idle

    stop = threading.Event()

    def loop() -> None:
        deadline = time.monotonic() + seconds
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                run_until_idle()
                time.sleep(0.02)
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(15)
