"""A fan-out through real worker processes on PostgreSQL: a worker killed inside an item loses
nothing, and no item is counted twice."""

from __future__ import annotations

import signal

import pytest

from tests.conftest import PG_URL
from tests.engine.procs import WORKFLOWS, Database, python, start_worker, stop, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]


class FanOutDatabase(Database):
    def env(self, **extra: str) -> dict[str, str]:
        env = super().env(**extra)
        env["RUNLEDGER_WORKFLOW_MODULES"] = f"{WORKFLOWS},tests.engine.e2e_fan_out_workflows"
        return env


@pytest.fixture
def db():
    with FanOutDatabase(PG_URL) as database:
        yield database


def _kill_inside_item_7(db, tmp_path, *, workflow: str, parent: str, started: str) -> None:
    """Start `workflow` as `parent` over 20 items (item 7 holds for 3 s), SIGKILL the worker once
    `started` (SQL) finds item 7 running, and let a second worker finish the parent; then check the
    parent's output and that the aggregate counted every item once."""
    items = [{"n": n, "hold": 3.0 if n == 7 else 0.0} for n in range(20)]
    python(db, f"from ingest.engine import create; create({workflow!r}, id={parent!r}, params={{'items': {items!r}}})")
    first = start_worker(db, lease=2.0, log=tmp_path / "w1.log")
    wait_for(lambda: db.execute(started) != [], timeout=60, what="item 7 to start")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    second = start_worker(db, lease=2.0, log=tmp_path / "w2.log")
    try:
        wait_for(
            lambda: db.execute(f"SELECT 1 FROM engine_instance WHERE id = '{parent}' AND status = 'complete'"),
            timeout=90,
            what="the parent to complete on the second worker",
        )
    finally:
        assert stop(second) == 0
    [(output,)] = db.execute(f"SELECT output FROM engine_instance WHERE id = '{parent}'")
    assert output == [n * 2 for n in range(20)]
    assert db.execute("SELECT expected, received, failed, state FROM engine_fanout") == [(20, 20, 0, "complete")]
    assert db.execute("SELECT count(*) FROM engine_fanoutitem WHERE state = 'complete'") == [(20,)]


def test_a_worker_killed_inside_an_item_loses_no_item_and_counts_none_twice(db, tmp_path):
    _kill_inside_item_7(
        db,
        tmp_path,
        workflow="e2e-fan-out-crash",
        parent="fan-crash",
        started="SELECT 1 FROM e2e_effects WHERE instance_id = '_fo1-7'",
    )
    # item 7 ran on both workers with one idempotency key; every item ran at least once
    runs = dict(db.execute("SELECT instance_id, count(DISTINCT pid) FROM e2e_effects GROUP BY instance_id"))
    assert len(runs) == 20 and runs["_fo1-7"] == 2
    assert db.execute("SELECT count(DISTINCT idempotency_key) FROM e2e_effects WHERE instance_id = '_fo1-7'") == [(1,)]


def test_a_worker_killed_inside_a_packed_item_reruns_only_that_item_and_counts_each_once(db, tmp_path):
    _kill_inside_item_7(
        db,
        tmp_path,
        workflow="e2e-packed-fan-out-crash",
        parent="pack-crash",
        started="SELECT 1 FROM e2e_effects WHERE step = 'item-7.e2e-item'",
    )
    assert db.execute("SELECT count(*) FROM engine_instance WHERE parent_id = 'pack-crash'") == [(4,)]
    # item 7's carrier (items 5-9) was taken over: items 5 and 6, recorded, did not run again;
    # item 7 ran on both workers with one idempotency key; every item ran at least once
    runs = dict(db.execute("SELECT step, count(*) FROM e2e_effects GROUP BY step"))
    assert len(runs) == 20 and runs["item-7.e2e-item"] == 2
    assert runs["item-5.e2e-item"] == runs["item-6.e2e-item"] == 1
    assert db.execute("SELECT count(DISTINCT idempotency_key) FROM e2e_effects WHERE step = 'item-7.e2e-item'") == [
        (1,)
    ]
