"""Versions and forks through the REST API: JSON answers and JSON errors, tenancy and roles as
the other instance actions, and an audit entry per action."""

from __future__ import annotations

from typing import Any

import pytest

from dashboard.models import AuditEntry
from ingest.engine import Workflow
from ingest.engine.models import Instance, RetiredVersion, Step
from ingest.engine.worker.turns import run_until_idle
from tests.api.conftest import ApiClient

pytestmark = [pytest.mark.db, pytest.mark.django_db]


class Scored(Workflow):
    name = "t-api-forkable"

    def run(self, event, step):
        rows = step.do("fetch", lambda ctx: 3)
        scored = step.do("score", lambda ctx: rows * event.payload.get("k", 1))
        return {"scored": scored}


class Parked(Workflow):
    name = "t-api-versioned"

    def run(self, event, step):
        step.sleep("nap", "1 hour")
        return step.version


def _start(client: ApiClient, workflow: str, id: str, **params: Any) -> None:
    assert (
        client.post("/api/instances", {"workflow": workflow, "tenant": "acme", "id": id, "params": params}).status_code
        == 201
    )


def test_an_operator_forks_an_instance_from_a_step_with_new_params(operator: ApiClient) -> None:
    _start(operator, "t-api-forkable", "api-f1", k=2)
    run_until_idle()
    response = operator.post("/api/instances/api-f1/fork", {"from_step": "score", "params": {"k": 5}, "reason": "k=5"})
    assert response.status_code == 201, response.content
    fork = response.json()
    assert fork["fork_of_id"] == "api-f1" and fork["fork_step"] == "score" and fork["workflow_version"] == 1
    assert fork["params"] == {"k": 5}
    run_until_idle()
    assert operator.get(f"/api/instances/{fork['id']}").json()["output"] == {"scored": 15}
    assert operator.get("/api/instances/api-f1").json()["forks"] == [fork["id"]]
    entry = AuditEntry.objects.get(action="instance.fork")
    assert entry.selection == {"instance_id": "api-f1", "from_step": "score", "edited": True}
    assert entry.tenants == ["acme"] and entry.reason == "k=5"


def test_a_fork_from_an_unknown_step_is_a_json_error_and_starts_nothing(operator: ApiClient) -> None:
    _start(operator, "t-api-forkable", "api-f2")
    run_until_idle()
    response = operator.post("/api/instances/api-f2/fork", {"from_step": "nope"})
    assert response.status_code == 404  # the instance has no such step
    assert response.json()["error"]["code"] == "unknown_step"
    assert "fetch, score" in response.json()["error"]["message"]
    assert Instance.objects.count() == 1 and not AuditEntry.objects.filter(action="instance.fork").exists()


def test_a_fork_without_a_step_is_a_json_error(operator: ApiClient) -> None:
    _start(operator, "t-api-forkable", "api-f3")
    response = operator.post("/api/instances/api-f3/fork", {"params": {"k": 1}})
    assert response.status_code in (400, 422) and "error" in response.json()
    assert Instance.objects.count() == 1


def test_a_viewer_cannot_fork_and_a_stranger_does_not_see_the_instance(
    operator: ApiClient, viewer: ApiClient, stranger: ApiClient
) -> None:
    _start(operator, "t-api-forkable", "api-f4")
    run_until_idle()
    assert viewer.post("/api/instances/api-f4/fork", {"from_step": "score"}).status_code == 403
    assert (
        stranger.post("/api/instances/api-f4/fork", {"from_step": "score"}).json()["error"]["code"]
        == "instance_not_found"
    )
    assert Instance.objects.count() == 1


def test_versions_are_listed_with_counts_and_an_old_one_is_retired_once_nothing_runs_on_it(
    operator: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _start(operator, "t-api-versioned", "api-v1")
    run_until_idle()  # sleeping on version 1
    monkeypatch.setattr(Parked, "version", 2)
    _start(operator, "t-api-versioned", "api-v2")
    assert operator.get("/api/workflows/t-api-versioned").json()["version"] == 2
    versions = operator.get("/api/workflows/t-api-versioned/versions").json()
    assert [(v["version"], v["instances"], v["running"], v["current"]) for v in versions] == [
        (2, 1, 1, True),
        (1, 1, 1, False),
    ]
    refused = operator.post("/api/workflows/t-api-versioned/versions/1/retire", {"reason": "old"})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "version_in_use"
    assert "1 instance still runs on it" in refused.json()["error"]["message"]
    assert not RetiredVersion.objects.exists() and not AuditEntry.objects.filter(action__contains="retire").exists()
    run_until_idle(advance_clock=True)
    done = operator.post("/api/workflows/t-api-versioned/versions/1/retire", {"reason": "old"})
    assert done.status_code == 200, done.content
    assert done.json()["retired_by"] == "api:op" and done.json()["retired_at"]
    assert AuditEntry.objects.get(action="workflow.version_retire").selection == {
        "workflow": "t-api-versioned",
        "version": 1,
    }


def test_retiring_is_refused_to_a_viewer_and_to_an_operator_of_only_some_tenants(
    operator: ApiClient, viewer: ApiClient, stranger: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _start(operator, "t-api-versioned", "api-v3")
    run_until_idle(advance_clock=True)
    monkeypatch.setattr(Parked, "version", 2)
    assert viewer.post("/api/workflows/t-api-versioned/versions/1/retire", {}).status_code == 403
    answer = stranger.post("/api/workflows/t-api-versioned/versions/1/retire", {})
    assert answer.status_code == 403 and "tenants you do not operate" in answer.json()["error"]["message"]
    assert not RetiredVersion.objects.exists()
    assert operator.post("/api/workflows/nope/versions/1/retire", {}).json()["error"]["code"] == "workflow_not_found"


def test_a_version_out_of_range_is_a_json_error(operator: ApiClient) -> None:
    for version in ("0", str(2**40)):
        response = operator.post(f"/api/workflows/t-api-versioned/versions/{version}/retire", {})
        assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_version"
    assert operator.post("/api/workflows/t-api-versioned/versions/-1/retire", {}).status_code in (404, 422)


def test_retiring_the_current_version_is_a_json_conflict(operator: ApiClient) -> None:
    response = operator.post("/api/workflows/t-api-versioned/versions/1/retire", {})
    assert response.status_code == 409 and "the code is version 1" in response.json()["error"]["message"]


def test_a_retired_versions_instance_cannot_be_forked_past_its_first_step(
    operator: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _start(operator, "t-api-forkable", "api-f5")
    run_until_idle()
    monkeypatch.setattr(Scored, "version", 2)
    assert operator.post("/api/workflows/t-api-forkable/versions/1/retire", {}).status_code == 200
    refused = operator.post("/api/instances/api-f5/fork", {"from_step": "score"})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "version_retired"
    fresh = operator.post("/api/instances/api-f5/fork", {"from_step": "fetch"})
    assert fresh.status_code == 201 and fresh.json()["workflow_version"] == 2
    assert not Step.objects.filter(instance_id=fresh.json()["id"]).exists()
