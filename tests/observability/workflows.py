"""Workflows whose runs leave a known ledger for the metrics tests."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from ingest.engine import NonRetryableError, Workflow


def _page_one(ctx: Any) -> int:
    if ctx.attempt == 1:
        raise RuntimeError("the first attempt times out")
    ctx.track_cost("openai", cost="0.25", model="gpt-test")
    return 1


class Flaky(Workflow):
    """fetch-page-1 fails once then spends $0.25; fetch-page-2 succeeds at once."""

    name = "obs-flaky"

    def run(self, event: Any, step: Any) -> Any:
        a = step.do("fetch-page-1", _page_one, retries={"limit": 2, "delay": 0, "backoff": "constant"})
        b = step.do("fetch-page-2", lambda ctx: 2)
        return a + b


def _explode(ctx: Any) -> None:
    raise NonRetryableError("the account is gone")


class Broken(Workflow):
    name = "obs-broken"

    def run(self, event: Any, step: Any) -> Any:
        step.do("explode", _explode)


class Napper(Workflow):
    name = "obs-napper"

    def run(self, event: Any, step: Any) -> Any:
        step.sleep("nap", "1 hour")
        return "rested"


class Waiter(Workflow):
    name = "obs-waiter"

    def run(self, event: Any, step: Any) -> Any:
        return step.wait_for_event("go-signal", type="go", timeout="1 hour")


def _always_fails(ctx: Any) -> None:
    raise RuntimeError("the upstream is down")


class BackingOff(Workflow):
    name = "obs-backing-off"

    def run(self, event: Any, step: Any) -> Any:
        step.do("call-upstream", _always_fails, retries={"limit": 3, "delay": "1 hour", "backoff": "constant"})


logged = logging.getLogger("runledger.ingest")


def _fetch_logged(ctx: Any) -> str:
    logged.info("fetching page %d", ctx.attempt)
    if ctx.attempt == 1:
        raise RuntimeError("the first fetch times out")
    return "page"


def _part(n: int) -> Any:
    def run(ctx: Any) -> int:
        logged.info("part %d", n)
        return n

    return run


def _use_secret(ctx: Any) -> None:
    raise NonRetryableError("login refused for key sk-live-123456")


class Logged(Workflow):
    """Steps that log: a retried one, a parallel group, and a sensitive one that fails."""

    name = "obs-logged"

    def run(self, event: Any, step: Any) -> Any:
        step.do("fetch", _fetch_logged, retries={"limit": 1, "delay": 0, "backoff": "constant"})
        step.all([step.call(f"part-{n}", _part(n)) for n in range(4)], concurrency=4)
        with contextlib.suppress(NonRetryableError):
            step.do("use-secret", _use_secret, sensitive=True)
        return "done"
