"""Helpers for testing your own workflows, as Cloudflare's workflow introspection offers.

    from ingest.engine.testing import introspect_workflow, run_workflow

    with introspect_workflow("gong-ingest") as wf:
        wf.disable_sleeps()
        wf.disable_retry_delays()
        wf.mock_step_result("llm-extract", {"facts": []})
        wf.mock_step_error("persist-facts-0", TimeoutError("db busy"), times=2)
        wf.mock_event("approval", {"approved": True})
        wf.force_step_timeout("fetch-page")
        wf.force_event_timeout("wait-approval")
        result = run_workflow("gong-ingest", params={...})
    assert result["status"] == "complete"

Everything runs through the real engine and ledger (in this thread, with the database your
test uses); only the named steps, sleeps, delays and events are overridden.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ingest.engine import testing_hooks
from ingest.engine.api import create
from ingest.engine.selectors import instance_status
from ingest.engine.worker.turns import run_until_idle


class Introspector:
    def __init__(self, overrides: testing_hooks.Overrides) -> None:
        self._o = overrides

    def disable_sleeps(self) -> Introspector:
        """`step.sleep` and `step.sleep_until` return at once (still recorded)."""
        self._o.skip_sleeps = True
        return self

    def disable_retry_delays(self) -> Introspector:
        """Retries happen at once instead of after their backoff delay."""
        self._o.skip_retry_delays = True
        return self

    def mock_step_result(self, name: str, value: Any, *, times: int | None = None) -> Introspector:
        """Step `name` returns `value` without running (every time, or the next `times` attempts)."""
        self._o.plan(name, value, times=times, is_error=False)
        return self

    def mock_step_error(self, name: str, error: BaseException, *, times: int | None = None) -> Introspector:
        """Attempts of step `name` raise `error` (every time, or the next `times` attempts)."""
        self._o.plan(name, error, times=times, is_error=True)
        return self

    def force_step_timeout(self, name: str, *, times: int | None = None) -> Introspector:
        """Attempts of step `name` time out (every time, or the next `times` attempts)."""
        self._o.step_timeouts[name] = times
        return self

    def mock_event(self, type: str, payload: Any) -> Introspector:
        """A `wait_for_event` of `type` receives `payload` as soon as it waits."""
        self._o.events.setdefault(type, []).append(payload)
        return self

    def force_event_timeout(self, name: str) -> Introspector:
        """`wait_for_event(name, ...)` times out at once."""
        self._o.event_timeouts.add(name)
        return self


@contextmanager
def introspect_workflow(workflow: str) -> Iterator[Introspector]:
    """Override every instance of `workflow` created (or run) inside the block."""
    overrides = testing_hooks.install(workflow=workflow)
    try:
        yield Introspector(overrides)
    finally:
        testing_hooks.uninstall(workflow=workflow)


@contextmanager
def introspect_instance(instance_id: str) -> Iterator[Introspector]:
    """Override one instance by id."""
    overrides = testing_hooks.install(instance_id=instance_id)
    try:
        yield Introspector(overrides)
    finally:
        testing_hooks.uninstall(instance_id=instance_id)


def run_workflow(
    workflow: str,
    *,
    params: Any = None,
    id: str | None = None,
    tenant: str = "default",
    advance_clock: bool = True,
    max_turns: int = 10_000,
) -> dict[str, Any]:
    """Create an instance, run it (and anything it starts) until nothing is due; return its status.

    With `advance_clock` (default) the engine's clock jumps over sleeps and delays that are not
    disabled, so a workflow that sleeps a day finishes in milliseconds.
    """
    handle = create(workflow, id=id, params=params, tenant=tenant)
    run_until_idle(advance_clock=advance_clock, max_turns=max_turns)
    return instance_status(instance_id=handle.id)
