"""Workflow versions: an in-flight instance keeps the path of the version it started on, a new
one takes the new path, a change without a guard fails naming both versions, and a version is
retired only once nothing runs on it."""

from __future__ import annotations

from collections import Counter

import pytest

from ingest.engine import (
    InvalidStepConfig,
    VersionInUse,
    VersionRetired,
    Workflow,
    create,
)
from ingest.engine.models import Instance, RetiredVersion, Step
from ingest.engine.selectors import workflow_versions
from ingest.engine.services import control
from ingest.engine.services.versions import workflow_version_retire

pytestmark = pytest.mark.db

RAN: Counter[str] = Counter()
CODE: dict[str, bool] = {}


@pytest.fixture(autouse=True)
def _reset(monkeypatch):
    RAN.clear()
    CODE.clear()
    monkeypatch.setattr(Billing, "version", 1)


def count(name):
    def fn(ctx):
        RAN[name] += 1
        return name

    return fn


class Billing(Workflow):
    """Version 1: fetch, nap, charge. Version 2 (CODE["guarded"]) adds "enrich" before "charge",
    guarded; CODE["unguarded"] inserts "audit" before "nap" without a guard."""

    name = "t-versioned"
    version = 1

    def run(self, event, step):
        step.do("fetch", count("fetch"))
        if CODE.get("unguarded"):
            step.do("audit", count("audit"))
        step.sleep("nap", "1 hour")
        path = "old"
        if CODE.get("guarded") and step.version_at_least(2):
            step.do("enrich", count("enrich"))
            path = "new"
        if CODE.get("fail"):
            step.do("charge", _fail, retries={"limit": 0})
        step.do("charge", count("charge"))
        return {"path": path, "version": step.version, "event_version": event.version}


def _fail(ctx):
    raise RuntimeError("card declined")


def _ship_version_2(monkeypatch, *, guarded: bool = True):
    monkeypatch.setattr(Billing, "version", 2)
    CODE["guarded" if guarded else "unguarded"] = True


@pytest.mark.django_db
def test_an_instance_records_the_version_it_started_on(drain, monkeypatch):
    create("t-versioned", id="v-rec-1")
    _ship_version_2(monkeypatch)
    create("t-versioned", id="v-rec-2")
    assert Instance.objects.get(id="v-rec-1").workflow_version == 1
    assert Instance.objects.get(id="v-rec-2").workflow_version == 2


@pytest.mark.django_db
def test_an_old_instance_keeps_the_old_path_after_a_code_change(drain, monkeypatch):
    old = create("t-versioned", id="v-old")
    drain()  # fetch done, sleeping in "nap"
    assert old.status()["status"] == "waiting"
    _ship_version_2(monkeypatch)
    drain(advance_clock=True)
    status = old.status()
    assert status["status"] == "complete"
    assert status["output"] == {"path": "old", "version": 1, "event_version": 1}
    assert [s["name"] for s in status["steps"]] == ["fetch", "nap", "charge"]
    assert RAN["enrich"] == 0 and RAN["fetch"] == 1


@pytest.mark.django_db
def test_a_new_instance_takes_the_new_path(drain, monkeypatch):
    _ship_version_2(monkeypatch)
    new = create("t-versioned", id="v-new")
    drain(advance_clock=True)
    status = new.status()
    assert status["output"] == {"path": "new", "version": 2, "event_version": 2}
    assert [s["name"] for s in status["steps"]] == ["fetch", "nap", "enrich", "charge"]
    assert status["version"] == 2


@pytest.mark.django_db
def test_both_versions_run_side_by_side_each_on_its_own_path(drain, monkeypatch):
    old = create("t-versioned", id="v-side-1")
    drain()
    _ship_version_2(monkeypatch)
    new = create("t-versioned", id="v-side-2")
    drain(advance_clock=True)
    assert old.status()["output"]["path"] == "old"
    assert new.status()["output"]["path"] == "new"
    assert RAN["enrich"] == 1 and RAN["charge"] == 2


@pytest.mark.django_db
def test_a_change_without_a_guard_fails_the_replay_naming_both_versions(drain, monkeypatch):
    old = create("t-versioned", id="v-mismatch")
    drain()
    _ship_version_2(monkeypatch, guarded=False)
    drain(advance_clock=True)
    status = old.status()
    assert status["status"] == "errored"
    assert status["error"]["name"] == "VersionMismatch"
    message = status["error"]["message"]
    assert "started on version 1" in message and "this code is version 2" in message
    assert "'audit'" in message and "'nap'" in message
    assert RAN["audit"] == 0  # refused before running anything of the new path


@pytest.mark.django_db
def test_a_change_without_bumping_the_version_says_so_naming_the_version(drain):
    old = create("t-versioned", id="v-nobump")
    drain()
    CODE["unguarded"] = True  # the code changed, its `version` did not
    drain(advance_clock=True)
    status = old.status()
    assert status["error"]["name"] == "NonDeterministicReplay"
    assert "started on version 1" in status["error"]["message"]
    assert "this code is also version 1" in status["error"]["message"]
    assert "version = 2" in status["error"]["message"]


@pytest.mark.django_db
def test_a_guard_above_the_code_version_is_refused(drain):
    CODE["guarded"] = True  # guards version 2 but the class still says version 1
    inst = create("t-versioned", id="v-guard-high")
    drain(advance_clock=True)
    status = inst.status()
    assert status["status"] == "errored" and status["error"]["name"] == InvalidStepConfig.__name__
    assert "version_at_least(2)" in status["error"]["message"] and "`version` is 1" in status["error"]["message"]


@pytest.mark.django_db
def test_a_worker_with_older_code_leaves_a_newer_instance_alone(drain, monkeypatch):
    _ship_version_2(monkeypatch)
    inst = create("t-versioned", id="v-rolling")
    monkeypatch.setattr(Billing, "version", 1)  # this worker has not been deployed yet
    CODE.clear()
    drain()
    assert RAN["fetch"] == 0
    assert Instance.objects.get(id="v-rolling").status == "waiting"
    _ship_version_2(monkeypatch)
    drain(advance_clock=True)
    assert inst.status()["output"]["path"] == "new"


@pytest.mark.django_db
def test_retiring_a_version_is_refused_while_an_instance_runs_on_it(drain, monkeypatch):
    old = create("t-versioned", id="v-retire-1")
    drain()
    _ship_version_2(monkeypatch)
    with pytest.raises(VersionInUse) as refused:
        workflow_version_retire(workflow="t-versioned", version=1, actor="ops")
    assert "1 instance still runs on it (1 waiting)" in str(refused.value)
    assert not RetiredVersion.objects.exists()
    drain(advance_clock=True)
    assert old.status()["status"] == "complete"
    retired = workflow_version_retire(workflow="t-versioned", version=1, actor="ops", reason="all done")
    assert (retired.version, retired.retired_by) == (1, "ops")
    rows = {v["version"]: v for v in workflow_versions(workflow="t-versioned", tenants=["default"])}
    assert rows[1]["retired_at"] is not None and rows[1]["instances"] == 1 and rows[1]["running"] == 0
    assert rows[2]["current"] and not rows[2]["retirable"]


@pytest.mark.django_db
def test_the_current_version_cannot_be_retired(monkeypatch):
    _ship_version_2(monkeypatch)
    with pytest.raises(VersionInUse, match="the code is version 2"):
        workflow_version_retire(workflow="t-versioned", version=2)
    assert not RetiredVersion.objects.exists()


@pytest.mark.django_db
def test_an_instance_of_a_retired_version_cannot_be_retried_but_can_be_replayed(drain, monkeypatch):
    CODE["fail"] = True
    old = create("t-versioned", id="v-retired-retry")
    drain(advance_clock=True)
    assert old.status()["status"] == "errored"
    _ship_version_2(monkeypatch)
    workflow_version_retire(workflow="t-versioned", version=1)
    with pytest.raises(VersionRetired, match="started on version 1"):
        control.instance_retry(instance_id="v-retired-retry")
    with pytest.raises(VersionRetired):
        control.instance_restart(instance_id="v-retired-retry", from_step="charge")
    assert Instance.objects.get(id="v-retired-retry").status == "errored"
    assert Step.objects.filter(instance_id="v-retired-retry", status="errored").exists()
    CODE.pop("fail")
    replay = control.instance_replay(instance_id="v-retired-retry")
    assert replay.workflow_version == 2
    drain(advance_clock=True)
    assert Instance.objects.get(id=replay.id).output["path"] == "new"


@pytest.mark.django_db
def test_a_restart_from_scratch_starts_on_the_current_version(drain, monkeypatch):
    old = create("t-versioned", id="v-restart")
    drain(advance_clock=True)
    _ship_version_2(monkeypatch)
    control.instance_restart(instance_id="v-restart")
    drain(advance_clock=True)
    assert old.status()["output"] == {"path": "new", "version": 2, "event_version": 2}


def test_a_workflow_version_must_be_a_whole_number_of_at_least_one():
    with pytest.raises(ValueError, match="version of workflow 't-bad-version'"):

        class Bad(Workflow):
            name = "t-bad-version"
            version = 0


@pytest.mark.django_db
def test_a_bulk_redrive_skips_the_dead_letters_of_a_retired_version(drain, monkeypatch):
    from ingest.engine.models import DeadLetter
    from ingest.engine.services.dead_letters import dead_letter_redrive

    CODE["fail"] = True
    create("t-versioned", id="v-dl-old")
    drain(advance_clock=True)
    _ship_version_2(monkeypatch)
    create("t-versioned", id="v-dl-new")
    drain(advance_clock=True)
    assert set(DeadLetter.objects.values_list("instance_id", flat=True)) == {"v-dl-old", "v-dl-new"}
    workflow_version_retire(workflow="t-versioned", version=1)
    ids = list(DeadLetter.objects.values_list("id", flat=True))
    assert dead_letter_redrive(ids=ids, actor="ops") == 1
    assert Instance.objects.get(id="v-dl-old").status == "errored"
    assert Instance.objects.get(id="v-dl-new").status == "queued"
