"""GET /api/instances/{id}/logs: what each attempt logged, as the schema says, from three sides."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ingest.engine import Workflow, create
from ingest.engine.models import Attempt
from ingest.engine.worker.turns import run_until_idle
from tests.api.conftest import ApiClient

pytestmark = [pytest.mark.db, pytest.mark.django_db]

log = logging.getLogger("runledger.test.api")
PLANTED = "ghp_4kR9sT2vW8yZ1aB3cD5eF7"


class ApiLogs(Workflow):
    name = "t-api-logs"

    def run(self, event, step):
        def pull(ctx):
            log.info("pulling with token=%s", PLANTED)
            if ctx.attempt == 1:
                raise TimeoutError("slow upstream")
            log.info("pulled %d rows", 3)
            return 3

        step.do("pull", pull, retries={"limit": 1, "delay": 0})
        step.do("quiet", lambda ctx: None)
        step.do("pull", lambda ctx: log.warning("second call of pull"))
        return "ok"


@pytest.fixture
def logged(db: Any) -> str:
    create("t-api-logs", id="api-logs", tenant="acme")
    run_until_idle()
    return "api-logs"


def test_the_logs_of_every_step_that_logged_per_attempt(viewer: ApiClient, logged: str) -> None:
    response = viewer.get(f"/api/instances/{logged}/logs")
    assert response.status_code == 200
    body = response.json()
    assert body["instance_id"] == logged and body["status"] == "complete" and body["next_after"] is None
    assert [(s["name"], s["seq"]) for s in body["steps"]] == [("pull", 1), ("pull", 2)]  # "quiet" logged nothing
    first = body["steps"][0]
    assert [a["number"] for a in first["attempts"]] == [1, 2]
    stored = Attempt.objects.get(step__instance_id=logged, step__name="pull", step__seq=1, number=2).logs
    attempt = first["attempts"][1]
    assert (
        [line["message"] for line in attempt["lines"]]
        == [x["message"] for x in stored["lines"]]
        == ["pulling with token=[redacted]", "pulled 3 rows"]
    )
    assert attempt == {
        "number": 2,
        "running": False,
        "dropped": 0,
        "truncated": False,
        "lines": [
            {
                "at": x["at"].replace("+00:00", "Z"),
                "level": "INFO",
                "logger": "runledger.test.api",
                "message": x["message"],
            }
            for x in stored["lines"]
        ],
    }
    assert PLANTED not in response.content.decode()


def test_one_step_or_one_call_of_it_and_an_unknown_step_is_a_json_404(viewer: ApiClient, logged: str) -> None:
    body = viewer.get(f"/api/instances/{logged}/logs", step="pull", seq=2).json()
    assert [(s["name"], s["seq"]) for s in body["steps"]] == [("pull", 2)]
    assert body["steps"][0]["attempts"][0]["lines"][0]["message"] == "second call of pull"
    body = viewer.get(f"/api/instances/{logged}/logs", step="quiet").json()
    assert [(s["name"], s["attempts"]) for s in body["steps"]] == [("quiet", [])]  # asked for: there, empty
    response = viewer.get(f"/api/instances/{logged}/logs", step="nope")
    assert response.status_code == 404 and response.json()["error"]["code"] == "step_not_found"
    assert "no step 'nope'" in response.json()["error"]["message"]


def test_pages_by_position_and_a_strangers_instance_is_missing(
    viewer: ApiClient, stranger: ApiClient, logged: str
) -> None:
    first = viewer.get(f"/api/instances/{logged}/logs", limit=1).json()
    assert [s["seq"] for s in first["steps"]] == [1] and first["next_after"] is not None
    rest = viewer.get(f"/api/instances/{logged}/logs", limit=1, after=first["next_after"]).json()
    assert [s["seq"] for s in rest["steps"]] == [2] and rest["next_after"] is None
    response = stranger.get(f"/api/instances/{logged}/logs")
    assert response.status_code == 404 and response.json()["error"]["code"] == "instance_not_found"


def test_the_schema_describes_the_logs_as_answered(viewer: ApiClient) -> None:
    schema = viewer.get("/api/openapi.json").json()
    operation = schema["paths"]["/api/instances/{instance_id}/logs"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"instance_id", "step", "seq", "after", "limit"}
    attempt = schema["components"]["schemas"]["AttemptLogOut"]
    assert set(attempt["required"]) == {"number", "running", "lines", "dropped", "truncated"}
    assert attempt["properties"]["dropped"]["minimum"] == 0
