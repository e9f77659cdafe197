"""Group commit (ingest/engine/writes/commits.py): concurrent instances' writes share one transaction.

PostgreSQL only. The tests run outside a test transaction (transaction=True): the group's own
connection must see the instances the test created, and the test must see what it committed.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import DatabaseError, connection

from ingest.engine import Workflow, create
from ingest.engine.clock import now
from ingest.engine.models import Attempt, History, Instance, Step
from ingest.engine.pg import connection_string
from ingest.engine.sql import group as sql_group
from ingest.engine.sql import instances as sql_instances
from ingest.engine.sql import steps as sql_steps
from ingest.engine.worker.loop import Worker
from ingest.engine.worker.turns import claim
from ingest.engine.writes import commits, route

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]

LEASE = timedelta(minutes=5)


class Steady(Workflow):
    name = "t-group-steady"

    def run(self, event, step):
        total = 0
        for i in range(5):
            total += step.do(f"add-{i}", lambda ctx, i=i: i + event.payload["base"])
        return {"total": total}


class Idle(Workflow):
    name = "t-group-idle"

    def run(self, event, step):
        return None


@pytest.fixture
def group(monkeypatch):
    """A fresh group for this test (the engine looks it up at each write), closed afterwards;
    both group commits (waited completions, and the rest) are this one here."""
    fresh = commits.GroupCommit()
    monkeypatch.setattr(commits, "group", fresh)
    monkeypatch.setattr(commits, "express", fresh)
    yield fresh
    fresh.close()


@pytest.fixture
def gate(monkeypatch):
    """Holds the first batch inside its statement until released, so that writes arriving
    meanwhile queue up and form the next batch. Records each batch's size."""

    class Gate:
        entered = threading.Event()
        release = threading.Event()
        sizes: list[int] = []

    real = commits._apply

    def held(conn, batch):
        Gate.sizes.append(len(batch))
        if len(Gate.sizes) == 1:
            Gate.entered.set()
            assert Gate.release.wait(30)
        return real(conn, batch)

    monkeypatch.setattr(commits, "_apply", held)
    return Gate


def leased(count: int, workflow: str = "t-group-idle") -> tuple[str, list[str]]:
    ids = [f"gc-{i}" for i in range(count)]
    for instance_id in ids:
        create(workflow, id=instance_id)
    token, claimed = claim(worker_id="test-worker", limit=count, lease=LEASE)
    assert sorted(c.id for c in claimed) == sorted(ids)
    return token, ids


def completion(instance_id: str, token: str, *, result: str | None, name: str = "work") -> sql_steps.Completion:
    t = now()
    row = sql_steps.StepRow(
        iid=instance_id,
        name=name,
        seq=1,
        position=0,
        kind="do",
        config='{"timeout": 1.0}',
        sensitive=False,
        has_rollback=False,
        label=name,
    )
    return sql_steps.Completion(
        row=row,
        token=token,
        now=t,
        started=t - timedelta(milliseconds=3),
        attempt=1,
        result=result,
        worker="test-worker",
        with_start=True,
    )


def in_threads(fns, gate) -> list:
    """Run the first function until its batch is inside its statement, then the others, which
    queue behind it; release the first batch once they all have. Returns results or errors."""
    out: list = [None] * len(fns)

    def run(i):
        try:
            out[i] = fns[i]()
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    threads[0].start()
    assert gate.entered.wait(30)
    for t in threads[1:]:
        t.start()
    deadline = time.monotonic() + 30
    while len(commits.group._queue) < len(fns) - 1:
        assert time.monotonic() < deadline, "the later writes never queued"
        time.sleep(0.005)
    gate.release.set()
    for t in threads:
        t.join(30)
    return out


def test_writes_queued_behind_a_batch_commit_together_and_each_gets_its_own_outcome(group, gate):
    token, ids = leased(8)
    fns = [
        lambda i=i: route.step_finish(
            row=completion(ids[i], token, result=json.dumps({"n": i})).row,
            token=token,
            now=now(),
            started=now(),
            attempt=1,
            result=json.dumps({"n": i}),
            worker="test-worker",
            with_start=True,
        )
        for i in range(8)
    ]
    out = in_threads(fns, gate)

    assert gate.sizes == [1, 7]  # the first alone, then everything that queued behind it
    assert (group.batches, group.writes) == (2, 8)
    steps = {s.instance_id: s for s in Step.objects.filter(instance_id__in=ids)}
    for i, instance_id in enumerate(ids):
        control, step_id = out[i]
        assert control == ""
        assert steps[instance_id].id == step_id
        assert steps[instance_id].status == "complete"
        assert steps[instance_id].result == {"n": i}
    assert Attempt.objects.filter(step_id__in=[s.id for s in steps.values()], ok=True).count() == 8
    kinds = sorted(History.objects.filter(instance_id__in=ids, kind__startswith="step.").values_list("kind", flat=True))
    assert kinds == ["step.completed"] * 8 + ["step.started"] * 8


def test_a_write_that_breaks_the_batch_fails_alone_and_its_neighbours_commit(group, gate):
    token, ids = leased(4)
    results = ['"fine-0"', "{not json", '"fine-2"', '"fine-3"']
    fns = [lambda i=i: group.finish(completion(ids[i], token, result=results[i])) for i in range(4)]
    out = in_threads(fns, gate)

    assert gate.sizes[:2] == [1, 3]  # the batch of three failed, then each was written alone
    assert isinstance(out[1], DatabaseError)
    assert "json" in str(out[1]).lower()
    assert [isinstance(o, tuple) for o in out] == [True, False, True, True]
    written = dict(Step.objects.filter(instance_id__in=ids).values_list("instance_id", "result"))
    assert written == {ids[0]: "fine-0", ids[2]: "fine-2", ids[3]: "fine-3"}


def test_a_lost_lease_writes_nothing_for_its_instance_and_the_rest_commit():
    token, ids = leased(3)
    Instance.objects.filter(id=ids[1]).update(lease_token="someone-else")
    with psycopg.connect(connection_string(), autocommit=True) as conn:
        written, completed = sql_group.group_write(
            conn,
            [completion(i, token, result='{"ok": true}') for i in ids],
            [],
        )
        assert set(written) == {(ids[0], "work", 1), (ids[2], "work", 1)}
        # The same instances now complete; the one whose lease is gone stays as it was.
        written, completed = sql_group.group_write(
            conn, [], [sql_instances.InstanceDone(iid=i, token=token, now=now(), output='{"v": 1}') for i in ids]
        )
    assert written == {}
    assert completed == {ids[0], ids[2]}
    assert not Step.objects.filter(instance_id=ids[1]).exists()
    rows = {i.id: i for i in Instance.objects.filter(id__in=ids)}
    assert (rows[ids[0]].status, rows[ids[0]].output, rows[ids[0]].lease_token) == ("complete", {"v": 1}, "")
    assert (rows[ids[1]].status, rows[ids[1]].lease_token) == ("running", "someone-else")
    assert History.objects.filter(instance_id=ids[1], kind__in=["step.completed", "step.started"]).count() == 0
    assert History.objects.filter(instance_id=ids[0], kind="instance.status", status="complete").count() == 1


def test_a_write_is_committed_when_the_call_returns():
    token, ids = leased(1)
    got = route.step_finish(
        row=completion(ids[0], token, result="7").row,
        token=token,
        now=now(),
        started=now(),
        attempt=1,
        result="7",
        worker="test-worker",
        with_start=False,
    )
    assert got is not None
    # Another connection sees it at once: the write did not wait in an open transaction.
    with psycopg.connect(connection_string(), autocommit=True) as other:
        assert other.execute("SELECT result FROM engine_step WHERE id = %s", [got[1]]).fetchone() == (7,)


def test_a_worker_runs_concurrent_instances_through_the_group_and_the_ledger_is_exact(group):
    ids = [f"steady-{i}" for i in range(40)]
    for i, instance_id in enumerate(ids):
        create("t-group-steady", id=instance_id, params={"base": i})
    worker = Worker(concurrency=8, poll_seconds=0.05).start()
    try:
        deadline = time.monotonic() + 120
        while Instance.objects.filter(workflow="t-group-steady").exclude(status="complete").exists():
            assert time.monotonic() < deadline, "the instances did not complete"
            time.sleep(0.05)
    finally:
        assert worker.stop(timeout=30)
    outputs = dict(Instance.objects.filter(workflow="t-group-steady").values_list("id", "output"))
    assert outputs == {f"steady-{i}": {"total": 10 + 5 * i} for i in range(40)}
    step_ids = list(Step.objects.filter(instance_id__in=ids, status="complete").values_list("id", flat=True))
    assert len(step_ids) == 200
    assert Attempt.objects.filter(step_id__in=step_ids, ok=True).count() == 200
    history = History.objects.filter(instance_id__in=ids)
    assert history.filter(kind="step.completed").count() == 200
    assert history.filter(kind="instance.status", status="complete").count() == 40
    # Every step completion and every instance completion went through the group.
    assert group.writes == 240
    assert 1 <= group.batches <= group.writes
    connection.close()


def test_a_connection_terminated_while_idle_is_replaced_and_the_write_goes_through(group):
    token, ids = leased(1)
    assert group.finish(completion(ids[0], token, result="1", name="before")) is not None
    pid = group._conn.info.backend_pid
    with psycopg.connect(connection_string(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        # The signal is asynchronous: wait until the session is gone, however slow the machine.
        deadline = time.monotonic() + 60
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
            assert time.monotonic() < deadline, "the session was not terminated"
            time.sleep(0.02)
    got = group.finish(completion(ids[0], token, result="2", name="after"))
    assert got is not None
    assert group._conn.info.backend_pid != pid
    assert Step.objects.get(instance_id=ids[0], name="after").result == 2


def test_an_error_that_is_not_the_databases_fails_the_write_instead_of_passing_for_a_lost_lease(group, monkeypatch):
    token, ids = leased(1)

    def broken(conn, batch):
        raise RuntimeError("a bug in the batch")

    monkeypatch.setattr(commits, "_apply", broken)
    with pytest.raises(DatabaseError, match="a bug in the batch"):
        group.finish(completion(ids[0], token, result="1"))
    assert not group._leading  # the lead was given up: the next write is not stuck
