"""`ctx.progress`: throttled reports from inside a long step, in the history, the engine's status
and the REST API's instance JSON."""

from __future__ import annotations

import pytest

from ingest.engine import Workflow, create
from ingest.engine.models import History
from tests.api.conftest import persona

pytestmark = pytest.mark.db


class Migrate(Workflow):
    name = "t-progress-migrate"

    def run(self, event, step):
        def migrate(ctx):
            total = event.payload["rows"]
            for done in range(1, total + 1):
                ctx.progress(done, total, f"row {done} of {total}")
            return total

        step.do("migrate-rows", migrate)
        return step.do("migrate-rows", lambda ctx: ctx.progress(3, message="three, no total"))


class AsyncMigrate(Workflow):
    name = "t-progress-async"

    async def run(self, event, step):
        async def migrate(ctx):
            ctx.progress(1, 2, "half")
            ctx.progress(2, 2, "all")
            return "ok"

        return await step.do("copy", migrate)


def reports(iid: str) -> list[tuple[str, dict]]:
    return list(
        History.objects.filter(instance_id=iid, kind="step.progress").order_by("id").values_list("step_name", "data")
    )


@pytest.mark.django_db
def test_a_step_reporting_per_row_writes_the_first_and_last_reports_not_thousands(drain):
    create("t-progress-migrate", id="prog-1", params={"rows": 5000})
    drain()
    rows = reports("prog-1")
    first_call = [d for label, d in rows if label == "migrate-rows"]
    assert 2 <= len(first_call) <= 10  # 5,000 reports in well under 10 s: the throttle keeps a few
    assert first_call[0]["done"] == 1 and first_call[-1] == {
        "done": 5000,
        "total": 5000,
        "message": "row 5000 of 5000",
        "attempt": 1,
    }
    assert [d for label, d in rows if label == "migrate-rows#2"] == [
        {"done": 3, "total": None, "message": "three, no total", "attempt": 1}
    ]


@pytest.mark.django_db
def test_with_no_throttle_every_report_is_written(drain, settings):
    settings.RUNLEDGER_PROGRESS_SECONDS = 0
    create("t-progress-migrate", id="prog-all", params={"rows": 40})
    drain()
    assert len([1 for label, _ in reports("prog-all") if label == "migrate-rows"]) == 40


@pytest.mark.django_db
def test_the_status_and_the_rest_api_carry_each_steps_latest_report(drain):
    h = create("t-progress-migrate", id="prog-api", tenant="acme", params={"rows": 10})
    drain()
    steps = h.status()["steps"]
    assert [s["progress"]["done"] for s in steps] == [10, 3]
    body = persona("op", [("acme", "operator")]).get("/api/instances/prog-api").json()
    assert [(s["progress"]["done"], s["progress"]["total"], s["progress"]["message"]) for s in body["steps"]] == [
        (10, 10, "row 10 of 10"),
        (3, None, "three, no total"),
    ]


@pytest.mark.django_db(transaction=True)  # the report is written from a thread of its own
def test_an_async_step_reports_from_its_event_loop(drain):
    h = create("t-progress-async", id="prog-async")
    drain()
    assert h.status()["output"] == "ok"
    assert [d["message"] for _, d in reports("prog-async")] == ["half", "all"]


class BadReport(Workflow):
    name = "t-progress-bad"

    def run(self, event, step):
        return step.do("bad", lambda ctx: ctx.progress(event.payload["done"]), retries={"limit": 0})


@pytest.mark.django_db
@pytest.mark.parametrize("done", [-1, "3", True])
def test_a_bad_report_fails_the_step_with_a_message_naming_the_argument(drain, done):
    h = create("t-progress-bad", params={"done": done})
    drain()
    error = h.status()["error"]
    assert error["name"] == "ValueError" and "ctx.progress(done=...)" in error["message"]
