"""`step.do(..., checkpoint="deferred")`: the workflow runs on before the step's completion has
committed; the next immediate step, any other write of the instance and its completion come
after it. And a worker claims for a slot whose turn has only its last write left.

The PostgreSQL tests run outside a test transaction (transaction=True), as the group commit's
own connection must see what the test created and the test what it committed.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import DatabaseError, connection

from ingest.engine import Workflow, create
from ingest.engine.clock import now
from ingest.engine.models import History, Instance, Step
from ingest.engine.pg import connection_string
from ingest.engine.sql import instances as sql_instances
from ingest.engine.worker.loop import Worker
from ingest.engine.worker.turns import claim, run_until_idle
from ingest.engine.writes import commits, route
from ingest.engine.writes.commits import EarlierWriteFailed

LEASE = timedelta(minutes=5)
SEEN: dict[str, object] = {}


class Ledger(Workflow):
    """Five deferred steps, then an immediate one that looks, from another connection, at what
    of this instance had committed when it started."""

    name = "t-deferred-ledger"

    def run(self, event, step):
        total = 0
        for i in range(5):
            total += step.do(f"put-{i}", lambda ctx, i=i: _put(i), checkpoint="deferred")
        committed = step.do("look", lambda ctx: _committed_steps(ctx.instance_id))
        return {"total": total, "committed_before_look": committed}


def _put(i: int) -> int:
    if i == 4:
        SEEN["reached-last-put"] = time.monotonic()
        reached.set()
    return i * 10


def _committed_steps(instance_id: str) -> list[str]:
    with psycopg.connect(connection_string(), autocommit=True) as other:
        rows = other.execute(
            "SELECT name FROM engine_step WHERE instance_id = %s AND status = 'complete' ORDER BY position",
            [instance_id],
        ).fetchall()
    return [r[0] for r in rows]


class Tail(Workflow):
    """Ends on deferred steps: its completion is queued while they may still be in flight."""

    name = "t-deferred-tail"

    def run(self, event, step):
        return [step.do(f"tail-{i}", lambda ctx, i=i: i, checkpoint="deferred") for i in range(3)]


class Idle(Workflow):
    name = "t-deferred-idle"

    def run(self, event, step):
        return None


class BadOption(Workflow):
    name = "t-deferred-bad-option"

    def run(self, event, step):
        return step.do("s", lambda: 1, checkpoint="later")


class Replayed(Workflow):
    name = "t-deferred-replayed"

    def run(self, event, step):
        a = step.do("a", lambda: _count("a"), checkpoint="deferred")
        step.sleep("nap", 60)
        b = step.do("b", lambda: _count("b"), checkpoint="deferred")
        return [a, b]


def _count(name: str) -> int:
    SEEN[name] = int(SEEN.get(name, 0)) + 1  # type: ignore[call-overload]
    return len(name)


reached = threading.Event()


@pytest.fixture(autouse=True)
def _reset():
    SEEN.clear()
    reached.clear()
    yield
    SEEN.clear()


@pytest.fixture
def group(group_commits):
    return group_commits[0]


def hold_batches(monkeypatch, holds):
    """Hold each batch for which `holds(batch)` is true inside its statement until released."""

    class Gate:
        entered = threading.Event()
        release = threading.Event()
        left = threading.Event()  # a held batch went on (released, or its 30 s were over)
        held: list[list[object]] = []

    real = commits._apply

    def apply(conn, batch):
        if not Gate.release.is_set() and holds(batch):
            Gate.held.append([item.write for item in batch])
            Gate.entered.set()
            try:
                assert Gate.release.wait(30)
            finally:
                Gate.left.set()
        return real(conn, batch)

    monkeypatch.setattr(commits, "_apply", apply)
    return Gate


# ---- PostgreSQL: the group commit ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("require_postgres")
def test_the_workflow_runs_on_while_a_deferred_completion_commits_and_the_next_immediate_step_waits(group, monkeypatch):
    gate = hold_batches(monkeypatch, lambda batch: True)  # the first batch: put-0's completion
    create("t-deferred-ledger", id="ledger-1")
    turn = threading.Thread(target=run_until_idle)
    turn.start()
    try:
        assert gate.entered.wait(30), "put-0's completion never reached the group commit"
        # put-0 is not committed, yet the workflow went on to put-4.
        assert reached.wait(10), "the workflow waited for a deferred completion to commit"
        assert _committed_steps("ledger-1") == []
    finally:
        gate.release.set()
        turn.join(60)
    inst = Instance.objects.get(id="ledger-1")
    assert inst.status == "complete"
    # The immediate step started only once all five deferred completions had committed.
    assert inst.output == {"total": 100, "committed_before_look": [f"put-{i}" for i in range(5)]}
    steps = list(
        Step.objects.filter(instance_id="ledger-1").order_by("position").values_list("name", "status", "result")
    )
    assert steps == [(f"put-{i}", "complete", i * 10) for i in range(5)] + [
        ("look", "complete", [f"put-{i}" for i in range(5)])
    ]
    kinds = list(
        History.objects.filter(instance_id="ledger-1", kind="step.completed").values_list("step_name", flat=True)
    )
    assert sorted(kinds) == sorted([f"put-{i}" for i in range(5)] + ["look"])
    assert group.writes == 6  # the five deferred completions and the instance's
    assert commits.express.writes == 1  # "look", whose thread waited for it
    connection.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("require_postgres")
def test_an_instance_that_ends_on_deferred_steps_completes_behind_them_on_the_same_group(group_commits):
    group, express = group_commits
    create("t-deferred-tail", id="tail-1")
    run_until_idle()
    inst = Instance.objects.get(id="tail-1")
    assert (inst.status, inst.output) == ("complete", [0, 1, 2])
    assert list(Step.objects.filter(instance_id="tail-1").order_by("position").values_list("name", "status")) == [
        (f"tail-{i}", "complete") for i in range(3)
    ]
    # Queued on `group` after its three deferred completions (which commit in queue order).
    assert (group.writes, express.writes) == (4, 0)
    connection.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("require_postgres")
def test_a_completion_a_thread_waits_for_is_not_queued_behind_other_instances_deferred_writes(
    group_commits, step_completion, monkeypatch
):
    group, express = group_commits
    gate = hold_batches(monkeypatch, lambda batch: any(i.write.iid == "slow" for i in batch))
    for instance_id in ("slow", "quick"):
        create("t-deferred-idle", id=instance_id)
    token, _ = claim(worker_id="test-worker", limit=2, lease=LEASE)

    def completion(instance_id):
        return step_completion(instance_id, "work", token=token, result='"done"')

    held = group.submit(completion("slow"))
    try:
        assert gate.entered.wait(30)
        got = route.step_finish(
            **{
                f: getattr(completion("quick"), f)
                for f in ("row", "token", "now", "started", "attempt", "result", "worker", "with_start")
            }
        )
        # Written while the other batch was still held: it did not queue behind it.
        assert got is not None and not gate.left.is_set()
        assert Step.objects.get(instance_id="quick").result == "done"
        assert not Step.objects.filter(instance_id="slow").exists()  # still held
    finally:
        gate.release.set()
    assert held.wait() is not None
    assert (group.writes, express.writes) == (1, 1)
    connection.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("require_postgres")
def test_after_a_failed_write_a_turns_later_writes_are_refused_and_the_instance_is_not_completed(
    group, step_completion
):
    for instance_id in ("bad-1", "good-1"):
        create("t-deferred-idle", id=instance_id)
    token, claimed = claim(worker_id="test-worker", limit=2, lease=LEASE)
    assert sorted(c.id for c in claimed) == ["bad-1", "good-1"]

    def completion(instance_id, name, result):
        return step_completion(instance_id, name, token=token, position=0 if name == "first" else 1, result=result)

    broken = group.submit(completion("bad-1", "first", "{not json"))
    later = group.submit(completion("bad-1", "second", '"fine"'))
    neighbour = group.submit(completion("good-1", "first", '"fine"'))
    with pytest.raises(DatabaseError, match="json"):
        broken.wait()
    with pytest.raises(EarlierWriteFailed, match="bad-1"):
        later.wait()
    with pytest.raises(EarlierWriteFailed):
        group.complete(sql_instances.InstanceDone(iid="bad-1", token=token, now=now(), output=None))
    assert neighbour.wait() is not None
    assert group.complete(sql_instances.InstanceDone(iid="good-1", token=token, now=now(), output='"ok"')) is True

    assert not Step.objects.filter(instance_id="bad-1").exists()
    assert Instance.objects.get(id="bad-1").status == "running"  # the lease expires; a new turn replays it
    assert Step.objects.get(instance_id="good-1").result == "fine"
    assert Instance.objects.get(id="good-1").status == "complete"
    connection.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("require_postgres")
def test_a_worker_claims_for_a_slot_whose_turn_has_only_its_last_write_left(group, monkeypatch):
    gate = hold_batches(monkeypatch, lambda batch: any(isinstance(i.write, sql_instances.InstanceDone) for i in batch))
    create("t-deferred-idle", id="first")
    worker = Worker(concurrency=1, poll_seconds=0.05).start()
    try:
        assert gate.entered.wait(30), "the first instance's completion never reached the group commit"
        create("t-deferred-idle", id="second")
        worker.wake.set()
        # With one slot, the second instance is claimed while the first one's completion is held
        # (the gate lets it go after 30 s at the latest).
        while Instance.objects.get(id="second").lease_owner != worker.worker_id:
            assert not gate.left.is_set(), "the worker did not claim while the last write committed"
            time.sleep(0.02)
        assert Instance.objects.get(id="first").status == "running"
    finally:
        gate.release.set()
        deadline = time.monotonic() + 60
        while Instance.objects.filter(id__in=["first", "second"]).exclude(status="complete").exists():
            assert time.monotonic() < deadline, "the instances did not complete"
            time.sleep(0.02)
        assert worker.stop(timeout=30)
    assert worker.inflight == 0 and worker._ending == set()
    connection.close()


# ---- any database ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_unknown_checkpoint_is_rejected_naming_the_choices(drain):
    h = create("t-deferred-bad-option", id="bad-option")
    drain()
    error = h.status()["error"]
    assert error["name"] == "InvalidStepConfig"
    assert "'later'" in error["message"] and "'immediate'" in error["message"] and "'deferred'" in error["message"]


@pytest.mark.django_db
def test_deferred_steps_are_replayed_from_history_not_run_again(drain):
    h = create("t-deferred-replayed", id="replayed")
    drain(advance_clock=True)
    assert h.status()["status"] == "complete"
    assert h.status()["output"] == [1, 1]
    assert SEEN == {"a": 1, "b": 1}  # "a" was replayed after the sleep, not run again
