"""completed_with_errors: a workflow that degraded gracefully ends in a terminal status of its own."""

from __future__ import annotations

import pytest

from ingest.engine import InstanceFinished, Workflow, WorkflowResult, create, get
from ingest.engine.models import FINISHED_STATUSES, DeadLetter, History, Instance, Status

pytestmark = pytest.mark.db


def test_a_workflow_result_says_whether_the_run_degraded_and_serialises_as_seed_004s_result():
    ok = WorkflowResult(metrics={"fetched": 3})
    partial = WorkflowResult(success=False, metrics={"fetched": 1}, errors=["keywords: timed out"], duration_ms=12)
    assert not ok.degraded and partial.degraded
    assert partial.as_output() == {
        "success": False,
        "metrics": {"fetched": 1},
        "errors": ["keywords: timed out"],
        "duration_ms": 12,
    }
    # success=True with errors still degraded: some branch failed
    assert WorkflowResult(errors=["one branch failed"]).degraded


def test_errors_may_be_exceptions_and_are_kept_as_their_name_and_message():
    result = WorkflowResult(errors=[KeyError("email"), "plain text"])
    assert result.as_output()["errors"] == ["KeyError: 'email'", "plain text"]


def test_completed_with_errors_is_a_finished_status_of_its_own():
    assert Status.COMPLETED_WITH_ERRORS == "completed_with_errors"
    assert Status.COMPLETED_WITH_ERRORS in FINISHED_STATUSES


class Onboard(Workflow):
    """Seed 004's domain onboarding in miniature: allSettled, errors collected, a result."""

    name = "t-onboard-degrades"

    def run(self, event, step):
        def fetch(what):
            def go(ctx):
                if what in event.payload.get("failing", []):
                    raise TimeoutError(f"{what} API timeout")
                return 10

            return go

        settled = step.all_settled(
            [step.call(f"fetch-{w}", fetch(w), retries={"limit": 0}) for w in ("backlinks", "keywords", "brand")]
        )
        errors = [
            f"{w} fetch failed: {s.error}"
            for w, s in zip(("backlinks", "keywords", "brand"), settled, strict=True)
            if not s.ok
        ]
        metrics = {
            f"{w}_fetched": s.value for w, s in zip(("backlinks", "keywords", "brand"), settled, strict=True) if s.ok
        }
        return WorkflowResult(success=not errors, metrics=metrics, errors=errors)


@pytest.mark.django_db(transaction=True)  # all_settled runs steps in threads
def test_a_workflow_returning_errors_ends_completed_with_errors_with_them_in_its_output(drain):
    h = create("t-onboard-degrades", id="onboard-partial", params={"failing": ["keywords"]})
    drain()
    status = h.status()
    assert status["status"] == "completed_with_errors"
    out = status["output"]
    assert out["success"] is False and out["errors"] == ["keywords fetch failed: keywords API timeout"]
    assert out["metrics"] == {"backlinks_fetched": 10, "brand_fetched": 10}
    assert isinstance(out["duration_ms"], int) and out["duration_ms"] >= 0
    assert status["error"] is None
    inst = Instance.objects.get(id="onboard-partial")
    assert inst.ended_at is not None and inst.lease_token == "" and inst.ready_at is None
    # a warning, not a failure: no dead letter, and the history says the status and the count
    assert not DeadLetter.objects.filter(instance_id="onboard-partial").exists()
    last = History.objects.filter(instance_id="onboard-partial", kind="instance.status").order_by("-id").first()
    assert last is not None and last.status == "completed_with_errors" and last.data["errors"] == 1


@pytest.mark.django_db(transaction=True)  # all_settled runs steps in threads
def test_a_workflow_result_without_errors_completes_as_complete(drain):
    h = create("t-onboard-degrades", id="onboard-clean", params={})
    drain()
    status = h.status()
    assert status["status"] == "complete"
    assert status["output"]["success"] is True and status["output"]["errors"] == []


@pytest.mark.django_db(transaction=True)  # all_settled runs steps in threads
def test_an_instance_completed_with_errors_takes_no_more_control_requests(drain):
    create("t-onboard-degrades", id="onboard-done", params={"failing": ["brand"]})
    drain()
    with pytest.raises(InstanceFinished):
        get("onboard-done").pause()
    with pytest.raises(InstanceFinished):
        get("onboard-done").terminate()


class DegradedParent(Workflow):
    name = "t-degraded-parent"

    def run(self, event, step):
        out = step.child("onboard", workflow="t-onboard-degrades", params={"failing": ["brand"]})
        return {"child_errors": out["errors"]}


@pytest.mark.django_db(transaction=True)  # all_settled runs steps in threads
def test_a_child_that_completed_with_errors_hands_its_output_to_its_parent(drain):
    h = create("t-degraded-parent", id="degraded-parent")
    drain()
    assert h.status()["status"] == "complete"
    assert h.status()["output"] == {"child_errors": ["brand fetch failed: brand API timeout"]}


class AsyncDegrades(Workflow):
    name = "t-async-degrades"

    async def run(self, event, step):
        await step.do("one", lambda ctx: 1)
        return WorkflowResult(success=False, errors=["partial"], metrics={"one": 1}, duration_ms=5)


@pytest.mark.django_db(transaction=True)  # all_settled runs steps in threads
def test_an_async_workflow_can_end_completed_with_errors_too(drain):
    h = create("t-async-degrades", id="async-degrades")
    drain()
    assert h.status()["status"] == "completed_with_errors"
    assert h.status()["output"] == {"success": False, "metrics": {"one": 1}, "errors": ["partial"], "duration_ms": 5}
