"""Fork from a step: the steps before it are copied (not run again), the params may change, the
new instance links to its origin and the origin's history names the fork."""

from __future__ import annotations

from collections import Counter

import pytest

from ingest.engine import (
    InstanceAlreadyExists,
    InvalidTransition,
    UnknownStep,
    VersionRetired,
    Workflow,
    create,
)
from ingest.engine.models import Attempt, History, Instance, Step
from ingest.engine.services.forks import fork_points, instance_fork
from ingest.engine.services.versions import workflow_version_retire

pytestmark = pytest.mark.db

RAN: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _reset():
    RAN.clear()


class Pipeline(Workflow):
    name = "t-forkable"

    def run(self, event, step):
        def fetch(ctx):
            RAN["fetch"] += 1
            return {"rows": 3}

        def score(ctx):
            RAN["score"] += 1
            return event.payload["threshold"] * 2

        rows = step.do("fetch", fetch)
        page = [step.do("page", lambda ctx, i=i: (RAN.update(["page"]), i)[1]) for i in range(2)]
        scored = step.do("score", score)
        return {"rows": rows["rows"], "pages": page, "scored": scored}


@pytest.mark.django_db
def test_a_fork_copies_the_steps_before_its_step_and_runs_the_rest_with_new_params(drain):
    create("t-forkable", id="f-src", params={"threshold": 5})
    drain()
    assert Instance.objects.get(id="f-src").output == {"rows": 3, "pages": [0, 1], "scored": 10}
    assert fork_points(instance_id="f-src") == ["fetch", "page", "page#2", "score"]
    RAN.clear()
    fork = instance_fork(
        instance_id="f-src", from_step="page#2", params={"threshold": 7}, actor="ada", reason="try a higher threshold"
    )
    assert fork.id == "f-src-fork-1" and fork.fork_of_id == "f-src" and fork.fork_step == "page#2"
    copied = list(Step.objects.filter(instance_id=fork.id).order_by("position").values_list("name", "seq", "status"))
    assert copied == [("fetch", 1, "complete"), ("page", 1, "complete")]
    assert Attempt.objects.filter(step__instance_id=fork.id).count() == 2
    drain()
    assert Instance.objects.get(id=fork.id).output == {"rows": 3, "pages": [0, 1], "scored": 14}
    assert dict(RAN) == {"page": 1, "score": 1}  # fetch and the first page were not run again
    created = History.objects.get(instance_id=fork.id, kind="instance.created")
    assert created.data["fork_of"] == "f-src" and created.data["copied_steps"] == 2 and created.data["edited"]
    assert created.actor == "ada"
    origin = History.objects.get(instance_id="f-src", kind="operator", data__action="fork")
    assert origin.data["forked_as"] == fork.id and origin.reason == "try a higher threshold"
    assert list(Instance.objects.get(id="f-src").forks.values_list("id", flat=True)) == [fork.id]


@pytest.mark.django_db
def test_a_fork_from_the_first_step_copies_nothing_and_keeps_the_params(drain):
    create("t-forkable", id="f-first", params={"threshold": 1})
    drain()
    fork = instance_fork(instance_id="f-first", from_step="fetch", new_id="f-first-again")
    assert not Step.objects.filter(instance_id="f-first-again").exists()
    drain()
    assert Instance.objects.get(id=fork.id).params == {"threshold": 1}
    assert RAN["fetch"] == 2


@pytest.mark.django_db
def test_a_fork_from_an_unknown_step_is_refused_listing_the_steps(drain):
    create("t-forkable", id="f-unknown", params={"threshold": 1})
    drain()
    with pytest.raises(UnknownStep, match="no step 'nope'.*fetch, page, page#2, score"):
        instance_fork(instance_id="f-unknown", from_step="nope")
    assert Instance.objects.count() == 1


@pytest.mark.django_db
def test_a_fork_to_a_taken_id_is_refused_and_writes_nothing(drain):
    create("t-forkable", id="f-taken", params={"threshold": 1})
    drain()
    with pytest.raises(InstanceAlreadyExists):
        instance_fork(instance_id="f-taken", from_step="score", new_id="f-taken")
    assert Step.objects.filter(instance_id="f-taken").count() == 4
    assert not History.objects.filter(data__action="fork").exists()


@pytest.mark.django_db
def test_a_fork_past_an_unfinished_step_is_refused(drain):
    create("t-forkable", id="f-running", params={"threshold": 1})
    drain()
    Step.objects.filter(instance_id="f-running", name="fetch").update(status="running")
    with pytest.raises(InvalidTransition, match="step 'fetch' before it is running"):
        instance_fork(instance_id="f-running", from_step="score")


@pytest.mark.django_db
def test_a_fork_keeps_the_origin_version_and_is_refused_once_it_is_retired(drain, monkeypatch):
    create("t-forkable", id="f-versioned", params={"threshold": 1})
    drain()
    monkeypatch.setattr(Pipeline, "version", 2)
    fork = instance_fork(instance_id="f-versioned", from_step="score")
    assert fork.workflow_version == 1  # the copied steps were recorded on version 1's path
    assert instance_fork(instance_id="f-versioned", from_step="fetch").workflow_version == 2
    drain()
    workflow_version_retire(workflow="t-forkable", version=1)
    with pytest.raises(VersionRetired, match="cannot fork instance f-versioned"):
        instance_fork(instance_id="f-versioned", from_step="score")
