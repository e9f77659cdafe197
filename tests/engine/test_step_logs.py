"""What a step logs is kept with its attempt: per attempt, bounded, redacted, nothing for a step
that logs nothing or is sensitive, and written while a long attempt still runs."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from django.test import override_settings

from ingest.engine import NonRetryableError, Workflow, create
from ingest.engine.models import Attempt, History, Step
from ingest.engine.redaction import forget_all, remember
from ingest.engine.worker.turns import run_until_idle

pytestmark = pytest.mark.db

log = logging.getLogger("runledger.test.steps")
other = logging.getLogger("tests.steplog.quiet")  # root's level (WARNING): its info lines are not made
SECRET = "sk-live-4f9a0c2e7d1b8a63"
RELEASE = threading.Event()


class Chatty(Workflow):
    name = "t-log-chatty"

    def run(self, event, step):
        def fetch(ctx):
            log.info("fetching page %d for %s", ctx.attempt, event.payload["account"])
            other.info("not made: below the root's level")
            other.warning("upstream slow on attempt %d", ctx.attempt)
            if ctx.attempt == 1:
                raise ConnectionError("upstream reset")
            return "ok"

        step.do("fetch", fetch, retries={"limit": 2, "delay": 0})
        step.do("quiet", lambda ctx: "nothing logged")
        return "done"


class Flood(Workflow):
    name = "t-log-flood"

    def run(self, event, step):
        def flood(ctx):
            for n in range(event.payload["lines"]):
                log.info("line %03d %s", n, "x" * event.payload.get("width", 0))
            return n

        return step.do("flood", flood)


class Leaky(Workflow):
    name = "t-log-leaky"

    def run(self, event, step):
        def call(ctx):
            log.warning("GET https://api.example/v1?api_key=%s&page=2", SECRET)
            log.info("connection key in use: %s", event.payload["key"])
            try:
                raise RuntimeError(f"refused with Authorization: Bearer {SECRET}")
            except RuntimeError:
                log.exception("call failed")
            raise NonRetryableError("gave up")

        step.do("call", call)


class AsyncLogs(Workflow):
    name = "t-log-async"

    async def run(self, event, step):
        async def work(ctx):
            log.info("from the event loop")
            return 1

        def blocking(ctx):
            log.info("from a thread of an async run")
            return 2

        await step.do("loop", work)
        return await step.do("thread", blocking)


class Long(Workflow):
    name = "t-log-long"

    def run(self, event, step):
        def slow(ctx):
            log.info("started the export")
            assert RELEASE.wait(60), "the test never released the step"
            log.info("export done")
            return "exported"

        return step.do("export", slow)


def lines(step_name: str, number: int, iid: str) -> dict:
    return Attempt.objects.get(step__instance_id=iid, step__name=step_name, number=number).logs


@pytest.mark.django_db
def test_each_attempt_keeps_the_lines_its_code_logged_and_a_quiet_step_keeps_none():
    create("t-log-chatty", id="logs-1", params={"account": "acme"})
    run_until_idle()
    first, second = lines("fetch", 1, "logs-1"), lines("fetch", 2, "logs-1")
    assert [(x["level"], x["logger"], x["message"]) for x in first["lines"]] == [
        ("INFO", "runledger.test.steps", "fetching page 1 for acme"),
        ("WARNING", "tests.steplog.quiet", "upstream slow on attempt 1"),
    ]
    assert [x["message"] for x in second["lines"]] == ["fetching page 2 for acme", "upstream slow on attempt 2"]
    assert first["dropped"] == 0 and first["lines"][0]["at"].endswith("+00:00")
    # The engine's own line about the failed attempt is not the step's.
    assert not any("retrying" in x["message"] for x in first["lines"] + second["lines"])
    assert lines("quiet", 1, "logs-1") is None
    assert not Step.objects.filter(instance_id="logs-1").exclude(live_log=None).exists()


@pytest.mark.django_db
def test_an_attempt_keeps_its_last_lines_within_the_bounds_and_counts_the_dropped_ones():
    with override_settings(RUNLEDGER_STEP_LOG_LINES=5):
        create("t-log-flood", id="logs-lines", params={"lines": 12})
        run_until_idle()
    kept = lines("flood", 1, "logs-lines")
    assert [x["message"].strip() for x in kept["lines"]] == [f"line {n:03d}" for n in range(7, 12)]
    assert kept["dropped"] == 7
    with override_settings(RUNLEDGER_STEP_LOG_BYTES=2000):
        create("t-log-flood", id="logs-bytes", params={"lines": 40, "width": 300})
        run_until_idle()
    kept = lines("flood", 1, "logs-bytes")
    assert len(json.dumps(kept)) < 2000 + 1000 and kept["lines"][-1]["message"].startswith("line 039")
    assert kept["dropped"] == 40 - len(kept["lines"]) and kept["dropped"] > 30


@pytest.mark.django_db
def test_a_planted_secret_is_redacted_and_a_sensitive_steps_lines_are_not_kept():
    key = "conn-key-0x5d2b9e77c1aa"
    remember(key)  # as the clear text of an encrypted column is when it is read
    try:
        create("t-log-leaky", id="logs-leaky", params={"key": key})
        run_until_idle()
    finally:
        forget_all()
    kept = lines("call", 1, "logs-leaky")
    text = json.dumps(kept)
    assert SECRET not in text and key not in text
    messages = [x["message"] for x in kept["lines"]]
    assert messages[0] == "GET https://api.example/v1?api_key=[redacted]&page=2"
    assert messages[1] == "connection key in use: [redacted]"
    assert messages[2].startswith("call failed\nTraceback") and messages[2].endswith(
        "RuntimeError: refused with Authorization: [redacted]"
    )
    assert Step.objects.get(instance_id="logs-leaky", name="call").status == "errored"


@pytest.mark.django_db
def test_a_sensitive_step_keeps_no_lines():
    class Sealed(Workflow):
        name = "t-log-sealed"

        def run(self, event, step):
            return step.do("sealed", lambda ctx: log.warning("sensitive words %s", SECRET), sensitive=True)

    create("t-log-sealed", id="logs-sealed")
    run_until_idle()
    assert lines("sealed", 1, "logs-sealed") is None


@pytest.mark.django_db(transaction=True)  # an async run writes from threads of its own
def test_an_async_runs_steps_keep_their_lines_on_the_loop_and_in_threads():
    create("t-log-async", id="logs-async")
    run_until_idle()
    assert [x["message"] for x in lines("loop", 1, "logs-async")["lines"]] == ["from the event loop"]
    assert [x["message"] for x in lines("thread", 1, "logs-async")["lines"]] == ["from a thread of an async run"]


@pytest.mark.django_db(transaction=True)
def test_a_long_attempts_lines_are_written_while_it_runs_then_kept_with_the_attempt():
    RELEASE.clear()
    create("t-log-long", id="logs-long")
    with override_settings(RUNLEDGER_STEP_LOG_SECONDS=0.2):
        worker = threading.Thread(target=run_until_idle)
        worker.start()
        try:
            deadline = time.monotonic() + 30
            live = None
            while time.monotonic() < deadline:
                live = (
                    Step.objects.filter(instance_id="logs-long", name="export")
                    .values_list("live_log", flat=True)
                    .first()
                )
                if live:
                    break
                time.sleep(0.05)
            assert live is not None, "the running attempt's lines were never written"
            assert live["attempt"] == 1 and [x["message"] for x in live["lines"]] == ["started the export"]
            row = History.objects.get(instance_id="logs-long", kind="step.log")
            assert (row.step_name, row.data) == ("export", {"attempt": 1, "lines": 1})
        finally:
            RELEASE.set()
            worker.join(60)
    step = Step.objects.get(instance_id="logs-long", name="export")
    assert step.status == "complete" and step.live_log is None
    assert [x["message"] for x in lines("export", 1, "logs-long")["lines"]] == ["started the export", "export done"]
