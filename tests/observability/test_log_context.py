"""Log lines from a real worker turn carry the engine's context: instance, workflow, step,
attempt, tenant, worker and trace id, on the turn's thread, in parallel steps' helper threads and
in async steps; a sensitive step's failure is logged without its message."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import connection

from ingest.engine import Workflow, create, tracing
from ingest.engine.models import Instance
from ingest.engine.worker.loop import Worker
from tests.observability.conftest import lines

pytestmark = pytest.mark.django_db(transaction=True)


def _run_with_worker(*ids: str, worker_id: str) -> None:
    worker = Worker(concurrency=2, poll_seconds=0.05, worker_id=worker_id).start()
    try:
        deadline = time.monotonic() + 60
        while Instance.objects.filter(id__in=ids).exclude(status="complete").exists():
            assert time.monotonic() < deadline, list(Instance.objects.filter(id__in=ids).values("id", "status"))
            time.sleep(0.05)
    finally:
        assert worker.stop(timeout=30)
        connection.close()


def _context_of(line: dict[str, Any]) -> dict[str, Any]:
    return {k: line.get(k) for k in ("instance", "workflow", "tenant", "worker", "trace_id")}


def test_lines_logged_inside_a_worker_turn_carry_instance_step_attempt_worker_and_trace(capture: Any) -> None:
    buffer, configure = capture
    configure(RUNLEDGER_LOG_FORMAT="json", RUNLEDGER_LOG_LEVEL="INFO")
    create("obs-logged", id="logged-1", tenant="acme")
    _run_with_worker("logged-1", worker_id="w-logs-1")

    got = lines(buffer)
    turn = {
        "instance": "logged-1",
        "workflow": "obs-logged",
        "tenant": "acme",
        "worker": "w-logs-1",
        "trace_id": tracing.trace_id_hex("logged-1"),
    }
    fetches = [ln for ln in got if ln["event"].startswith("fetching page")]
    assert [(ln["event"], ln["step"], ln["attempt"]) for ln in fetches] == [
        ("fetching page 1", "fetch", 1),
        ("fetching page 2", "fetch", 2),
    ]
    assert all(_context_of(ln) == turn for ln in fetches)
    # The engine's own line about the failed attempt, inside the same binding.
    (retry,) = [ln for ln in got if ln["event"].startswith("step fetch attempt 1 failed")]
    assert "RuntimeError: the first fetch times out" in retry["event"]
    assert retry["level"] == "INFO" and retry["step"] == "fetch" and retry["attempt"] == 1
    assert _context_of(retry) == turn
    # Parallel steps run on helper threads too: each line names its own step and the turn.
    parts = sorted((ln for ln in got if ln["event"].startswith("part ")), key=lambda ln: ln["event"])
    assert [(ln["event"], ln["step"], ln["attempt"]) for ln in parts] == [
        (f"part {n}", f"part-{n}", 1) for n in range(4)
    ]
    assert all(_context_of(ln) == turn for ln in parts)
    # A sensitive step's failure is logged by class only: its message may hold a secret.
    (failed,) = [ln for ln in got if ln["event"].startswith("step use-secret failed for good")]
    assert failed["level"] == "WARNING" and "NonRetryableError" in failed["event"]
    assert "sk-live-123456" not in buffer.getvalue()
    # Outside the turn nothing is bound.
    import logging

    logging.getLogger("runledger.ingest").info("after the turn")
    assert "instance" not in lines(buffer)[-1]


class AsyncLogged(Workflow):
    name = "obs-logged-async"

    async def run(self, event: Any, step: Any) -> Any:
        import asyncio
        import logging

        log = logging.getLogger("runledger.ingest")

        async def part(ctx: Any) -> str:
            await asyncio.sleep(0.01)
            log.info("async part %s", ctx.name)
            return str(ctx.name)

        def sync_part(ctx: Any) -> str:
            log.info("sync part %s", ctx.name)
            return str(ctx.name)

        await step.all([step.call("a-1", part), step.call("a-2", part), step.call("s-1", sync_part)])
        return "done"


def test_async_steps_each_log_with_their_own_step(capture: Any) -> None:
    buffer, configure = capture
    configure(RUNLEDGER_LOG_FORMAT="json", RUNLEDGER_LOG_LEVEL="INFO")
    create("obs-logged-async", id="logged-async-1", tenant="globex")
    _run_with_worker("logged-async-1", worker_id="w-logs-2")

    parts = {ln["event"]: ln for ln in lines(buffer) if " part " in ln["event"]}
    assert set(parts) == {"async part a-1", "async part a-2", "sync part s-1"}
    for event, ln in parts.items():
        assert ln["step"] == event.rsplit(" ", 1)[1] and ln["attempt"] == 1
        assert _context_of(ln) == {
            "instance": "logged-async-1",
            "workflow": "obs-logged-async",
            "tenant": "globex",
            "worker": "w-logs-2",
            "trace_id": tracing.trace_id_hex("logged-async-1"),
        }


def test_console_output_stays_plain_with_the_context_at_the_end(capture: Any) -> None:
    buffer, configure = capture
    configure(RUNLEDGER_LOG_LEVEL="INFO")  # the default format, as `manage.py up` runs
    create("obs-logged", id="logged-console-1", tenant="acme")
    _run_with_worker("logged-console-1", worker_id="w-logs-3")
    (line,) = [ln for ln in buffer.getvalue().splitlines() if "fetching page 2" in ln]
    assert not line.startswith("{")
    assert line.endswith(
        f"INFO runledger.ingest fetching page 2 [instance=logged-console-1 workflow=obs-logged "
        f"step=fetch attempt=2 tenant=acme worker=w-logs-3 "
        f"trace_id={tracing.trace_id_hex('logged-console-1')}]"
    )
