"""Flow control across real worker processes on PostgreSQL: per-key limits under racing claims,
fairness between a large and a small tenant with an operator's limit for one tenant, start rate
limits, start_at and timeouts.

Steps record their intervals in `e2e_effects`; the tests compute from them how many steps of
one key ran at the same moment, and read the ledger for the rest.
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import PG_URL
from tests.engine.procs import (
    WORKFLOWS,
    Database,
    python,
    start_worker,
    start_workers,
    stop,
    wait_for,
)

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]


class FlowDatabase(Database):
    def env(self, **extra: str) -> dict[str, str]:
        env = super().env(**extra)
        env["RUNLEDGER_WORKFLOW_MODULES"] = f"{WORKFLOWS},tests.engine.e2e_flow_workflows"
        return env


@pytest.fixture
def db():
    with FlowDatabase(PG_URL) as database:
        yield database


def max_concurrent_by_key(db: Database, workflow: str) -> dict[str, int]:
    """The most step intervals of one concurrency key that overlapped at any instant."""
    rows = db.execute(
        "SELECT i.concurrency_key, e.started, e.ended FROM e2e_effects e JOIN engine_instance i "
        "ON i.id = e.instance_id WHERE i.workflow = %s AND e.ended IS NOT NULL",
        (workflow,),
    )
    peaks: dict[str, int] = {}
    for key in {r[0] for r in rows}:
        # Ends sort before starts at the same instant: touching intervals do not overlap.
        events = sorted(
            [(r[1], 1) for r in rows if r[0] == key] + [(r[2], -1) for r in rows if r[0] == key],
            key=lambda e: (e[0], e[1]),
        )
        running = peak = 0
        for _, delta in events:
            running += delta
            peak = max(peak, running)
        peaks[key] = peak
    return peaks


def create_many(db: Database, workflow: str, items: str) -> None:
    python(
        db,
        "from ingest.engine.services import instances as services\n"
        f"items = {items}\n"
        "for b in range(0, len(items), 100):\n"
        f"    services.instance_create_batch(workflow={workflow!r}, items=items[b:b + 100])",
    )


def test_a_per_tenant_limit_holds_across_four_racing_worker_processes(db, tmp_path):
    create_many(
        db,
        "e2e-flow-tenant",
        "[{'id': f'{t}-{i}', 'tenant': t, 'params': {'hold': 0.15}} "
        "for t in ('acme', 'blue', 'cyan') for i in range(20)]",
    )
    # Two turns per process: the six slots (three tenants, two each) cannot all go to one worker.
    workers = start_workers(db, 4, log_dir=tmp_path, concurrency=2, lease=10.0, poll=0.05)
    try:
        wait_for(
            lambda: db.execute("SELECT count(*) FROM engine_instance WHERE status = 'complete'") == [(60,)],
            timeout=240,
            interval=0.5,
            what="60 instances to complete",
        )
    finally:
        codes = [stop(w) for w in workers]
    assert codes == [0, 0, 0, 0]
    assert max_concurrent_by_key(db, "e2e-flow-tenant") == {"acme": 2, "blue": 2, "cyan": 2}
    assert db.execute("SELECT count(*), count(DISTINCT instance_id) FROM e2e_effects") == [(60, 60)]
    assert db.execute("SELECT count(DISTINCT pid) > 1 FROM e2e_effects") == [(True,)]


def test_a_small_tenant_finishes_before_a_large_backlog_drains_and_a_tenants_own_limit_holds(db, tmp_path):
    # acme's backfill: 1,000 instances below live priority, with an operator's limit of 3 in place
    # of the workflow's 2; blue keeps the workflow's cap.
    create_many(
        db,
        "e2e-flow-tenant",
        "[{'id': f'a-{i:04}', 'tenant': 'acme', 'priority': -10, 'params': {'hold': 0.05}} for i in range(1000)]",
    )
    python(
        db,
        "from ingest.engine.services.limits import concurrency_limit_set\n"
        "concurrency_limit_set(workflow='e2e-flow-tenant', key='acme', max_concurrent=3, actor='test')",
    )
    create_many(
        db, "e2e-flow-tenant", "[{'id': f'b-{i:02}', 'tenant': 'blue', 'params': {'hold': 0.05}} for i in range(10)]"
    )
    workers = start_workers(db, 2, log_dir=tmp_path, concurrency=4, lease=10.0, poll=0.05)
    try:
        wait_for(
            lambda: (
                db.execute(
                    "SELECT count(*) FROM engine_instance WHERE concurrency_key = 'blue' AND status = 'complete'"
                )
                == [(10,)]
            ),
            timeout=240,
            interval=0.2,
            what="tenant blue's 10 instances to complete",
        )
        wait_for(
            lambda: (
                db.execute(
                    "SELECT count(*) FROM engine_instance WHERE concurrency_key = 'acme' AND status = 'complete'"
                )[0][0]
                >= 60
            ),
            timeout=240,
            interval=0.2,
            what="60 of acme's instances to complete",
        )
        left = db.execute(
            "SELECT count(*) FROM engine_instance WHERE concurrency_key = 'acme' AND status <> 'complete'"
        )
    finally:
        codes = [stop(w) for w in workers]
    assert codes == [0, 0]
    assert left[0][0] >= 800, f"acme had only {left[0][0]} of 1,000 left when blue finished"
    peaks = max_concurrent_by_key(db, "e2e-flow-tenant")
    # acme ran up to its own limit (above the workflow's cap) and never past it; blue kept the cap.
    assert peaks["acme"] == 3 and peaks["blue"] <= 2, peaks


def test_starts_keep_to_the_rate_and_start_at_is_honoured_across_processes(db, tmp_path):
    create_many(db, "e2e-flow-rated", "[{'id': f'r-{i:02}', 'tenant': 'acme'} for i in range(15)]")
    python(
        db,
        "from datetime import timedelta\nfrom ingest.engine import create\nfrom ingest.engine.clock import now\n"
        "create('e2e-flow-tenant', id='later', tenant='zeta', start_at=now() + timedelta(seconds=3))",
    )
    began = time.time()
    workers = start_workers(db, 2, log_dir=tmp_path, concurrency=8, lease=10.0, poll=0.05)
    try:
        wait_for(
            lambda: db.execute("SELECT count(*) FROM engine_instance WHERE status = 'complete'") == [(16,)],
            timeout=120,
            interval=0.2,
            what="the rated instances and the delayed one to complete",
        )
    finally:
        codes = [stop(w) for w in workers]
    assert codes == [0, 0]
    starts = [
        r[0]
        for r in db.execute(
            "SELECT extract(epoch FROM started_at) FROM engine_instance "
            "WHERE workflow = 'e2e-flow-rated' ORDER BY started_at"
        )
    ]
    for s in starts:
        assert sum(1 for t in starts if s <= t < s + 2) <= 5, starts
    assert starts[-1] - starts[0] >= 4.0  # 15 starts at 5 per 2 s need three windows
    later = db.execute("SELECT extract(epoch FROM started_at - created_at) FROM engine_instance WHERE id = 'later'")
    assert later[0][0] >= 3.0
    assert time.time() - began < 60


def test_a_sleeping_instance_past_its_timeout_is_woken_and_errors(db, tmp_path):
    python(db, "from ingest.engine import create; create('e2e-flow-timeout', id='late-1')")
    worker = start_worker(db, lease=10.0, poll=0.05, log=tmp_path / "w.log")
    try:
        wait_for(
            lambda: db.execute("SELECT 1 FROM engine_instance WHERE id = 'late-1' AND status = 'errored'"),
            timeout=60,
            what="the instance to time out",
        )
    finally:
        assert stop(worker) == 0
    [(name, message, took)] = db.execute(
        "SELECT error_name, error_message, extract(epoch FROM ended_at - started_at) FROM engine_instance "
        "WHERE id = 'late-1'"
    )
    assert name == "WorkflowTimeout" and "late-1" in message and "timeout of 2 seconds" in message
    # Not before its 2 s timeout, and woken for it, not at the end of its hour-long sleep.
    assert 2.0 <= took < 30.0
    assert db.execute("SELECT step FROM e2e_effects") == [("before",)]
