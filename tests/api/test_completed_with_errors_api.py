"""completed_with_errors through the REST API: listed by its own status, its errors in the output."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.engine import Workflow, WorkflowResult
from ingest.engine.worker.turns import run_until_idle
from tests.api.conftest import ApiClient

pytestmark = [pytest.mark.db, pytest.mark.django_db]


class PartlyDone(Workflow):
    name = "t-api-partly-done"

    def run(self, event, step):
        step.do("fetch", lambda ctx: 3)
        return WorkflowResult(success=False, metrics={"fetched": 3}, errors=["keywords: timed out"])


def test_an_instance_completed_with_errors_is_listed_by_that_status_with_its_errors(operator: ApiClient) -> None:
    created: Any = operator.post(
        "/api/instances", {"workflow": "t-api-partly-done", "tenant": "acme", "id": "partly-1"}
    )
    assert created.status_code == 201
    run_until_idle()
    detail = operator.get("/api/instances/partly-1").json()
    assert detail["status"] == "completed_with_errors" and detail["error"] is None
    assert detail["output"]["errors"] == ["keywords: timed out"] and detail["output"]["metrics"] == {"fetched": 3}
    listed = operator.get("/api/instances", status="completed_with_errors").json()
    assert [i["id"] for i in listed["items"]] == ["partly-1"]
    assert operator.get("/api/instances", status="errored").json()["items"] == []
