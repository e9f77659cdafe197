"""Retention archives finished instances past their workflow's retention_days to gzip JSON lines
and purges them in batches; open dead letters, pending approvals, parents of unfinished children
and recent or unfinished instances stay."""

from __future__ import annotations

import gzip
import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from ingest.engine import Workflow
from ingest.engine.models import (
    ApprovalRequest,
    DeadLetter,
    History,
    Instance,
    RetentionBatch,
    Step,
)
from ingest.engine.services.retention import retention_cutoff, retention_purge_batch, retention_run

pytestmark = pytest.mark.django_db


class ShortLived(Workflow):
    name = "ret-short"
    retention_days = 7

    def run(self, event, step):
        return None


class Kept(Workflow):
    name = "ret-default"

    def run(self, event, step):
        return None


NOW = timezone.now()


def _instance(
    id: str, *, workflow: str = "ret-default", status: str = "complete", age_days: float = 40, **extra
) -> Instance:
    ended = NOW - timedelta(days=age_days)
    inst = Instance.objects.create(
        id=id,
        workflow=workflow,
        tenant="acme",
        status=status,
        params={"n": id},
        created_at=ended - timedelta(minutes=5),
        updated_at=ended,
        ended_at=ended if status in ("complete", "errored", "terminated") else None,
        **extra,
    )
    Step.objects.create(
        instance=inst,
        name="fetch",
        seq=1,
        position=1,
        status="complete",
        attempts=1,
        started_at=ended - timedelta(minutes=4),
        ended_at=ended,
        result={"rows": 3},
    )
    History.objects.create(
        instance=inst, workflow=workflow, tenant="acme", kind="instance.status", status=status, created_at=ended
    )
    return inst


def _archived(tmp_path: Path) -> list[dict]:
    lines = []
    for f in sorted(tmp_path.rglob("*.jsonl.gz")):
        with gzip.open(f, "rt") as fh:
            lines += [json.loads(line) for line in fh]
    return lines


def test_the_cutoff_is_the_retention_period_before_now():
    assert retention_cutoff(days=30, now=NOW) == NOW - timedelta(days=30)


def test_a_finished_old_instance_is_archived_with_its_steps_and_history_then_purged(tmp_path):
    _instance("old-1")
    _instance("new-1", age_days=2)
    _instance("running-old", status="running")
    result = retention_run(now=NOW, archive_dir=tmp_path)
    assert result.purged == {"ret-default": 1}
    assert set(Instance.objects.values_list("id", flat=True)) == {"new-1", "running-old"}
    assert not History.objects.filter(instance_id="old-1").exists()
    assert not Step.objects.filter(instance_id="old-1").exists()
    [line] = _archived(tmp_path)
    assert line["instance"]["id"] == "old-1" and line["instance"]["params"] == {"n": "old-1"}
    assert [s["name"] for s in line["steps"]] == ["fetch"] and line["steps"][0]["result"] == {"rows": 3}
    assert [h["kind"] for h in line["history"]] == ["instance.status"]
    batch = RetentionBatch.objects.get()
    assert (batch.workflow, batch.purged, batch.first_instance_id) == ("ret-default", 1, "old-1")
    assert batch.archive.endswith("ret-default/" + f"{NOW:%Y-%m-%d}.jsonl.gz")


def test_open_dead_letters_and_pending_approvals_are_never_purged(tmp_path):
    errored = _instance("dl-open", status="errored")
    DeadLetter.objects.create(
        instance=errored,
        workflow="ret-default",
        tenant="acme",
        error_name="E",
        error_message="m",
        signature="s",
        normalized_message="m",
        created_at=NOW,
    )
    resolved = _instance("dl-resolved", status="errored")
    DeadLetter.objects.create(
        instance=resolved,
        workflow="ret-default",
        tenant="acme",
        error_name="E",
        error_message="m",
        signature="s",
        normalized_message="m",
        created_at=NOW,
        state="discarded",
    )
    waiting = _instance("approval-pending", status="terminated")
    ApprovalRequest.objects.create(
        instance=waiting,
        tenant="acme",
        workflow="ret-default",
        title="t",
        step_name="w",
        event_type="approval",
        state="pending",
        created_at=NOW,
    )
    parent = _instance("parent")
    _instance("child", status="running", parent=parent)
    retention_run(now=NOW, archive_dir=tmp_path)
    assert set(Instance.objects.values_list("id", flat=True)) == {"dl-open", "approval-pending", "parent", "child"}
    assert DeadLetter.objects.get().instance_id == "dl-open"


def test_each_workflow_keeps_its_own_retention_days(tmp_path):
    _instance("short-8d", workflow="ret-short", age_days=8)
    _instance("short-6d", workflow="ret-short", age_days=6)
    _instance("default-8d", workflow="ret-default", age_days=8)
    _instance("gone-workflow-31d", workflow="no-longer-registered", age_days=31)
    result = retention_run(now=NOW, archive_dir=tmp_path)
    assert result.purged == {"ret-short": 1, "no-longer-registered": 1}
    assert set(Instance.objects.values_list("id", flat=True)) == {"short-6d", "default-8d"}


def test_purging_goes_in_batches_each_committed_on_its_own(tmp_path):
    for i in range(5):
        _instance(f"b-{i}")
    assert retention_purge_batch(workflow="ret-default", now=NOW, archive_dir=tmp_path, batch=2) == 2
    result = retention_run(now=NOW, archive_dir=tmp_path, batch=2)
    assert result.batches == 2 and result.purged == {"ret-default": 3}
    assert list(RetentionBatch.objects.order_by("id").values_list("purged", flat=True)) == [2, 2, 1]
    assert sorted(line["instance"]["id"] for line in _archived(tmp_path)) == [f"b-{i}" for i in range(5)]
    assert retention_run(now=NOW, archive_dir=tmp_path).purged == {}


def test_a_stop_request_ends_the_run_between_batches(tmp_path):
    for i in range(4):
        _instance(f"s-{i}")
    calls = []
    result = retention_run(now=NOW, archive_dir=tmp_path, batch=1, stopping=lambda: calls.append(1) or len(calls) > 2)
    assert result.batches == 2 and Instance.objects.count() == 2


def test_retention_days_must_be_a_positive_whole_number():
    with pytest.raises(ValueError, match="retention_days of workflow 'ret-bad'"):
        type("Bad", (Workflow,), {"name": "ret-bad", "retention_days": 0, "run": lambda self, e, s: None})


def test_the_command_runs_one_round(tmp_path, settings, capsys):
    settings.RUNLEDGER_ARCHIVE_DIR = tmp_path
    _instance("cmd-old")
    call_command("retention", "--once")
    assert "purged 1 instance(s) in 1 batch(es)" in capsys.readouterr().out
    assert not Instance.objects.filter(id="cmd-old").exists()
    assert len(_archived(tmp_path)) == 1
