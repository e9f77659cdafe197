"""`runledger logs INSTANCE [--step NAME] [--follow]` against a live test server over HTTP."""

from __future__ import annotations

import io
import logging
import threading
import time
from typing import Any

import pytest
from django.test import override_settings
from rich.console import Console

from dashboard.cli import main
from dashboard.models import Role
from ingest.engine import Workflow, create
from ingest.engine.models import Instance
from ingest.engine.worker.turns import run_until_idle
from tests.cli.test_cli_live import _token, run

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

log = logging.getLogger("runledger.test.cli")
PLANTED = "xoxb-1234567890-abcdefghijkl"
GATE = threading.Event()


@pytest.fixture
def tokens(transactional_db: Any) -> dict[str, str]:
    return {
        "viewer": _token("logs-view", [("acme", Role.VIEWER)]),
        "stranger": _token("logs-strange", [("initech", Role.OPERATOR)]),
    }


class CliLogs(Workflow):
    name = "t-cli-logs"

    def run(self, event, step):
        def load(ctx):
            log.info("loading [batch] %d with Bearer %s", ctx.attempt, PLANTED)
            for n in range(event.payload.get("extra", 0)):
                log.info("row %d", n)
            if event.payload.get("wait"):
                assert GATE.wait(60), "the test never opened the gate"
                log.warning("gate opened")
            return "loaded"

        step.do("load", load)
        step.do("quiet", lambda ctx: "nothing")
        return "ok"


def test_logs_prints_each_steps_lines_redacted_and_a_step_at_a_time(live_server: Any, tokens: dict[str, str]) -> None:
    create("t-cli-logs", id="cli-logs-1", tenant="acme", params={"extra": 2})
    run_until_idle()
    code, out = run(live_server, tokens["viewer"], "logs", "cli-logs-1")
    assert code == 0, out
    lines = out.strip().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "load a1 INFO    runledger.test.cli loading [batch] 1 with Bearer [redacted]",
        "load a1 INFO    runledger.test.cli row 0",
        "load a1 INFO    runledger.test.cli row 1",
    ]
    assert PLANTED not in out
    code, out = run(live_server, tokens["viewer"], "logs", "cli-logs-1", "--step", "quiet")
    assert code == 0 and "step 'quiet' of cli-logs-1 logged nothing" in out
    code, out = run(live_server, tokens["viewer"], "logs", "cli-logs-1", "--step", "missing")
    assert code == 1 and "step_not_found" in out and "HTTP 404" in out
    code, out = run(live_server, tokens["stranger"], "logs", "cli-logs-1")
    assert code == 1 and "instance_not_found" in out


def test_logs_says_when_earlier_lines_were_left_out(live_server: Any, tokens: dict[str, str]) -> None:
    with override_settings(RUNLEDGER_STEP_LOG_LINES=2):
        create("t-cli-logs", id="cli-logs-2", tenant="acme", params={"extra": 5})
        run_until_idle()
    code, out = run(live_server, tokens["viewer"], "logs", "cli-logs-2")
    assert code == 0
    assert "… 4 earlier line(s) of load attempt 1 left out" in out and out.rstrip().endswith("row 4")
    assert "row 2" not in out


def test_logs_follow_prints_a_running_steps_lines_as_they_are_written_until_the_end(
    live_server: Any, tokens: dict[str, str]
) -> None:
    GATE.clear()
    create("t-cli-logs", id="cli-logs-3", tenant="acme", params={"wait": True})
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=200, force_terminal=False, color_system=None, soft_wrap=True
    )  # a message is one line, however long: asserts read it whole
    result: dict[str, int] = {}

    def follow() -> None:
        result["code"] = main(
            [
                "--url",
                live_server.url,
                "--token",
                tokens["viewer"],
                "logs",
                "cli-logs-3",
                "--follow",
                "--interval",
                "0.1",
                "--timeout",
                "60",
            ],
            console=console,
        )

    with override_settings(RUNLEDGER_STEP_LOG_SECONDS=0.2):
        worker = threading.Thread(target=run_until_idle)
        worker.start()
        follower = threading.Thread(target=follow)
        follower.start()
        try:
            deadline = time.monotonic() + 30
            while "loading [batch]" not in buffer.getvalue() and time.monotonic() < deadline:
                time.sleep(0.05)
            # Printed while the step still runs: its attempt's lines so far, written live.
            assert "loading [batch]" in buffer.getvalue(), buffer.getvalue()
            assert Instance.objects.get(id="cli-logs-3").status == "running"
        finally:
            GATE.set()
            worker.join(60)
        follower.join(60)
    assert Instance.objects.get(id="cli-logs-3").status == "complete"
    assert result["code"] == 0, buffer.getvalue()
    lines = [line.split(" ", 1)[1] for line in buffer.getvalue().strip().splitlines()]
    assert lines == [
        "load a1 INFO    runledger.test.cli loading [batch] 1 with Bearer [redacted]",
        "load a1 WARNING runledger.test.cli gate opened",
    ]  # each line once, live or not
