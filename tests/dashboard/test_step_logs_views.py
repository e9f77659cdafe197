"""What a step logged, on the run page: under its step, per attempt, bounded with a "truncated"
marker, a planted secret redacted; a running attempt's lines shown and pushed live."""

from __future__ import annotations

import logging
import re

import pytest
from django.test import override_settings
from django.utils import timezone
from ledger_factories import make_instance

from dashboard.live.render import Pending, Subscription, render_instance
from ingest.engine import Workflow, create
from ingest.engine.models import Attempt, Step
from ingest.engine.worker.turns import run_until_idle

pytestmark = [pytest.mark.db, pytest.mark.django_db]

log = logging.getLogger("runledger.test.pages")
PLANTED = "sk-live-9e8d7c6b5a4f3e2d"


class Talkative(Workflow):
    name = "t-page-logs"

    def run(self, event, step):
        def sync(ctx):
            log.info("attempt %d: syncing %d contacts", ctx.attempt, event.payload["rows"])
            for n in range(event.payload["rows"]):
                log.info("contact %02d synced", n)
            log.warning("POST https://crm.example/api?access_token=%s refused", PLANTED)
            if ctx.attempt == 1:
                raise ConnectionError("crm reset the connection")
            return "synced"

        step.do("sync-contacts", sync, retries={"limit": 1, "delay": 0})
        step.do("tidy", lambda ctx: "quiet")
        return "ok"


def _step_row(html: str, step_id: str) -> str:
    start = html.index(f'<details id="{step_id}"')
    return html[start : html.index("</details>", html.index('class="steplogs"', start))]


def test_the_run_page_shows_each_attempts_lines_under_its_step_bounded_and_redacted(operator):
    with override_settings(RUNLEDGER_STEP_LOG_LINES=4):
        create("t-page-logs", id="page-logs", tenant="acme", params={"rows": 6})
        run_until_idle()
    html = operator.get("/instances/page-logs/").content.decode()
    row = _step_row(html, "step-sync-contacts-1")
    blocks = re.findall(r'<div class="steplog" data-attempt="(\d)"(.*?)</pre>', row, re.S)
    assert [number for number, _ in blocks] == ["1", "2"]
    for number, block in blocks:
        kept = Attempt.objects.get(step__instance_id="page-logs", step__name="sync-contacts", number=int(number)).logs
        assert kept["dropped"] == 4 and len(kept["lines"]) == 4  # 8 lines logged, the last 4 kept
        assert "truncated" in block and "the 4 earlier lines left out" in block
        assert re.findall(r'<span class="muted">[^<]*</span> (.*?)</span>\n', block) == [
            x["message"] for x in kept["lines"]
        ]
        assert "contact 05 synced" in block and "contact 01 synced" not in block
        assert "access_token=[redacted] refused" in block
    assert PLANTED not in html
    assert "16 log lines" in row  # the step, closed, says it has lines
    tidy = html[html.index('<details id="step-tidy-1"') :]
    assert 'class="steplogs"' not in tidy[: tidy.index("</details>")]


def test_a_running_attempts_lines_show_under_its_step_and_come_with_the_live_push(operator):
    inst = make_instance("page-live", status="running")
    now = timezone.now()
    step = Step.objects.create(
        instance=inst, name="export", seq=1, position=0, status="running", attempts=2, started_at=now
    )
    Attempt.objects.create(
        step=step,
        number=1,
        started_at=now,
        ended_at=now,
        error_name="Boom",
        logs={
            "lines": [{"at": "2026-01-01T10:00:00.000+00:00", "level": "INFO", "logger": "x", "message": "first try"}],
            "dropped": 0,
        },
    )
    step.live_log = {
        "attempt": 2,
        "dropped": 0,
        "lines": [
            {
                "at": "2026-01-01T10:00:05.250+00:00",
                "level": "INFO",
                "logger": "runledger.ingest",
                "message": "page 1 of 3",
            },
            {
                "at": "2026-01-01T10:00:06.000+00:00",
                "level": "WARNING",
                "logger": "runledger.ingest",
                "message": "page 2 slow",
            },
        ],
    }
    step.save()
    html = operator.get("/instances/page-live/").content.decode()
    row = html[html.index('<details id="step-export-1"') :]
    assert 'data-attempt="2" data-running' in row and "running</strong>, updated live" in row
    assert 'class="step-liveline' in row and "WARNING page 2 slow" in row  # the newest line beside the name
    assert "10:00:05.250" in row and "first try" in row
    # An earlier attempt's lines left in live_log are not shown as the running attempt's.
    step.live_log = {**step.live_log, "attempt": 1}
    step.save()
    html = operator.get("/instances/page-live/").content.decode()
    assert "page 2 slow" not in html and "first try" in html
    # The live feed: a step.log change re-renders that step's row only, with its lines.
    step.live_log = {**step.live_log, "attempt": 2}
    step.save()
    sub = Subscription("instance", ["acme"], [], None, instance_id="page-live")
    render_instance(operator_user(), sub, Pending(cursor=1, instances={"page-live"}))  # the first push: whole
    push = render_instance(
        operator_user(), sub, Pending(cursor=2, instances={"page-live"}, kinds={"step.log"}, steps={"export"})
    )
    assert 'id="step-export-1" hx-swap-oob="true"' in push and "page 2 slow" in push
    assert 'id="instance-history"' not in push  # a partial push, not the page again


def operator_user():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="operator")


def test_a_sensitive_step_says_its_lines_are_not_kept(operator):
    inst = make_instance("page-sealed", status="complete")
    now = timezone.now()
    Step.objects.create(
        instance=inst,
        name="load-key",
        seq=1,
        position=0,
        status="complete",
        attempts=1,
        sensitive=True,
        started_at=now,
        ended_at=now,
    )
    html = operator.get("/instances/page-sealed/").content.decode()
    assert "Logs: not kept for a sensitive step." in html
