"""The API's side of acting on what one read: `expected_version` refuses an action on an instance or
a dead letter that moved since (409 JSON, code `stale`, saying what changed, nothing done), and
every answer about a failed step says whether a retry can help (`non_retryable`)."""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest
from django.utils import timezone

from dashboard.models import AuditEntry
from ingest.engine.models import DeadLetter, History, Instance, Step
from ingest.engine.signature import error_signature
from tests.api.conftest import ApiClient

pytestmark = pytest.mark.db
_n = count(1)
RETRIES = {"retries": {"limit": 5, "delay": 10, "backoff": "exponential"}, "timeout": 600}


def errored(*, error: str = "Boom", attempts: int = 6, tenant: str = "acme") -> DeadLetter:
    """An errored test-echo instance, its failed step and its dead letter."""
    now, n = timezone.now(), next(_n)
    inst = Instance.objects.create(
        id=f"api-stale-{n}",
        workflow="test-echo",
        tenant=tenant,
        status="errored",
        params={"n": n},
        created_at=now,
        updated_at=now,
        error_name=error,
        error_message="no such account",
    )
    Step.objects.create(
        instance=inst,
        name="echo",
        seq=1,
        position=1,
        status="errored",
        attempts=attempts,
        error_name=error,
        error_message="no such account",
        started_at=now,
        ended_at=now,
        config=RETRIES,
    )
    sig, normalized = error_signature(
        workflow="test-echo", step_name="echo", error_name=error, message="no such account"
    )
    return DeadLetter.objects.create(
        instance=inst,
        workflow="test-echo",
        tenant=tenant,
        step_name="echo",
        error_name=error,
        error_message="no such account",
        signature=sig,
        normalized_message=normalized,
        created_at=now,
    )


def error(r: Any) -> dict[str, Any]:
    return dict(r.json()["error"])


def test_an_instance_action_with_a_version_that_moved_is_a_409_saying_what_changed(operator: ApiClient) -> None:
    inst = errored().instance
    read = operator.get(f"/api/instances/{inst.id}").json()
    assert read["version"].isdigit()
    assert operator.post(f"/api/instances/{inst.id}/retry", {"reason": "first"}).status_code == 200
    History.objects.create(
        instance=inst,
        workflow=inst.workflow,
        tenant=inst.tenant,
        kind="instance.status",
        status="errored",
        created_at=timezone.now(),
    )
    Instance.objects.filter(pk=inst.id).update(status="errored")  # it failed again meanwhile
    before = (History.objects.count(), AuditEntry.objects.count())
    r = operator.post(f"/api/instances/{inst.id}/retry", {"reason": "again", "expected_version": read["version"]})
    assert r.status_code == 409 and r["Content-Type"].startswith("application/json")
    body = error(r)
    assert body["code"] == "stale"
    assert "api:op retried it at" in body["message"] and "it errored at" in body["message"]
    assert (History.objects.count(), AuditEntry.objects.count()) == before
    now = operator.get(f"/api/instances/{inst.id}").json()["version"]
    done = operator.post(f"/api/instances/{inst.id}/retry", {"reason": "again", "expected_version": now})
    assert done.status_code == 200 and done.json()["version"] != now


def test_an_expected_version_that_is_not_a_version_is_a_422(operator: ApiClient) -> None:
    inst = errored().instance
    r = operator.post(f"/api/instances/{inst.id}/pause", {"reason": "x", "expected_version": "yesterday"})
    assert r.status_code == 422 and error(r)["code"] == "validation_error"
    assert "expected_version: String should match pattern" in error(r)["message"]
    assert Instance.objects.get(pk=inst.id).status == "errored"


def test_a_dead_letter_discard_with_a_version_that_moved_is_a_409(operator: ApiClient) -> None:
    letter = errored()
    listed = operator.get("/api/dead-letters").json()
    seen = next(d for d in listed if d["id"] == letter.id)["version"]
    assert operator.post(f"/api/dead-letters/{letter.id}/retry", {"reason": "provider back"}).status_code == 200
    r = operator.post(f"/api/dead-letters/{letter.id}/discard", {"reason": "give up", "expected_version": seen})
    assert r.status_code == 409 and error(r)["code"] == "stale"
    assert "was redriven by api:op" in error(r)["message"]
    assert DeadLetter.objects.get(pk=letter.id).state == "redriven"
    assert not AuditEntry.objects.filter(action="dead_letter.discard").exists()


def test_a_dead_letter_acted_on_as_read_answers_its_new_state_and_version(operator: ApiClient) -> None:
    letter = errored()
    seen = operator.get("/api/dead-letters").json()[0]
    r = operator.post(
        f"/api/dead-letters/{letter.id}/discard", {"reason": "test data", "expected_version": seen["version"]}
    )
    assert r.status_code == 200 and r.json()["state"] == "discarded" and r.json()["version"] != seen["version"]


def test_a_step_that_raised_non_retryable_error_is_flagged_in_every_answer(operator: ApiClient) -> None:
    futile, hopeful = errored(error="NonRetryableError", attempts=1), errored(error="TimeoutError")
    detail = operator.get(f"/api/instances/{futile.instance_id}").json()
    assert detail["non_retryable"] is True and [s["non_retryable"] for s in detail["steps"]] == [True]
    assert operator.get(f"/api/instances/{hopeful.instance_id}").json()["non_retryable"] is False
    listed = {d["id"]: d["non_retryable"] for d in operator.get("/api/dead-letters").json()}
    assert listed == {futile.id: True, hopeful.id: False}
    preview = operator.post("/api/dead-letters/redrive/preview", {"ids": [futile.id, hopeful.id]}).json()
    assert preview["non_retryable_ids"] == [futile.id]
    bulk = operator.post("/api/bulk-actions/preview", {"action": "retry", "query": "workflow=test-echo"}).json()
    assert bulk["count"] == 2 and bulk["non_retryable"] == 1 and bulk["non_retryable_sample"] == [futile.instance_id]


def test_a_step_that_failed_without_using_its_retries_counts_as_non_retryable(operator: ApiClient) -> None:
    renamed = errored(error="acme.errors.NoSuchAccount", attempts=1)  # a subclass under its own name
    assert operator.get(f"/api/instances/{renamed.instance_id}").json()["non_retryable"] is True
