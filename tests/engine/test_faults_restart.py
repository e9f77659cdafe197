"""PostgreSQL restarted under real worker processes: every connection is found dead and replaced
at once, and the interrupted turns are retried by the worker that holds them, not left for
their lease to expire.

Behaviour, not figures: each wait is bounded by half the lease, which tells "retried at once"
from "left for the lease" on however busy a machine. How fast the recovery is (about a second
here) is bench/faults.py's to print.

A restart is simulated the way its clients see one, on a database of the test's own: every
session of it ends, and new ones are refused for a moment (tests/engine/faults.py).
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import PG_URL
from tests.engine.faults import (
    FaultDatabase,
    completed_steps_rerun,
    in_flight,
    overlapping_runs,
    progress_lags,
    restart,
    terminate_sessions,
)
from tests.engine.procs import python, start_workers, stop, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

LEASE = 60.0  # a turn left for its lease would show up as a stall of a minute
PROMPT = LEASE / 2  # anything sooner was not left for its lease


@pytest.fixture
def db():
    with FaultDatabase(PG_URL) as database:
        yield database


def create(db: FaultDatabase, prefix: str, count: int, *, hold: float) -> None:
    python(
        db,
        "from ingest.engine import create_batch\n"
        f"for b in range(0, {count}, 100):\n"
        f"    create_batch('e2e-five-steps', [{{'id': f'{prefix}-{{i}}', 'params': {{'hold': {hold}, 'n': i}}}}"
        f"                                    for i in range(b, min(b + 100, {count}))])",
    )


def complete(db: FaultDatabase, prefix: str) -> int:
    return int(
        db.execute("SELECT count(*) FROM engine_instance WHERE id LIKE %s AND status = 'complete'", (f"{prefix}-%",))[
            0
        ][0]
    )


def test_every_interrupted_instance_progresses_long_before_its_lease_once_the_database_is_back(db, tmp_path):
    workers = start_workers(db, 2, log_dir=tmp_path, concurrency=8, lease=LEASE, poll=1.0)
    try:
        create(db, "busy", 200, hold=0.05)
        wait_for(lambda: complete(db, "busy") >= 30, timeout=60, what="the run to be under way")
        # The instances the restart interrupts; the queued ones behind them wait for a free slot
        # whether or not the database restarts.
        waiting = in_flight(db, "e2e-five-steps")
        back = restart(db, down_seconds=1.0)
        wait_for(lambda: complete(db, "busy") == 200, timeout=120, interval=0.5, what="every instance to complete")
    finally:
        codes = [stop(w) for w in workers]
    lags = progress_lags(db, ids=waiting, since=back)
    assert len(lags) >= len(waiting) // 2 > 0  # most were interrupted (a few had just finished)
    assert max(lags) < PROMPT, f"slowest instance progressed {max(lags):.2f} s after the database was back"
    assert codes == [0, 0]
    assert db.execute("SELECT count(DISTINCT (instance_id, step)) FROM e2e_effects") == [(1000,)]
    assert overlapping_runs(db) == 0
    assert completed_steps_rerun(db) == 0


def test_instances_created_after_a_restart_of_an_idle_database_run_at_once(db, tmp_path):
    workers = start_workers(db, 2, log_dir=tmp_path, concurrency=8, lease=LEASE, poll=1.0)
    try:
        # Every turn thread of both workers has a connection of its own by now.
        create(db, "warm", 64, hold=0.0)
        wait_for(lambda: complete(db, "warm") == 64, timeout=60, what="the warm-up")
        assert terminate_sessions(db) > 0
        time.sleep(1.0)  # the workers are idle: nobody notices until the next instance comes
        create(db, "new", 48, hold=0.0)
        wait_for(lambda: complete(db, "new") == 48, timeout=120, interval=0.2, what="the new instances")
    finally:
        codes = [stop(w) for w in workers]
    took = [
        float(row[0])
        for row in db.execute(
            "SELECT extract(epoch FROM ended_at - created_at) FROM engine_instance WHERE id LIKE 'new-%' ORDER BY 1"
        )
    ]
    assert len(took) == 48
    assert took[-1] < PROMPT, f"the slowest new instance took {took[-1]:.2f} s (p50 {took[24]:.2f} s)"
    assert codes == [0, 0]


def test_a_restart_in_the_middle_of_long_steps_never_runs_one_step_in_two_processes(db, tmp_path):
    # Every worker's session ends at once, its liveness lock with it: no worker may take that for
    # death while the others are alive and still running their steps.
    workers = start_workers(db, 2, log_dir=tmp_path, concurrency=8, lease=LEASE, poll=1.0)
    try:
        create(db, "long", 16, hold=2.0)
        wait_for(
            lambda: db.execute("SELECT count(DISTINCT instance_id) FROM e2e_effects")[0][0] >= 16,
            timeout=60,
            what="every instance to be inside its first step",
        )
        restart(db, down_seconds=0.5)
        wait_for(lambda: complete(db, "long") == 16, timeout=180, interval=0.5, what="every instance to complete")
    finally:
        codes = [stop(w) for w in workers]
    assert codes == [0, 0]
    assert overlapping_runs(db) == 0
    assert completed_steps_rerun(db) == 0
    # A step interrupted by the restart ran again in the process that held it, right away.
    moved = db.execute(
        "SELECT count(*) FROM (SELECT instance_id FROM e2e_effects GROUP BY instance_id "
        "HAVING count(DISTINCT pid) > 1) x"
    )
    assert moved == [(0,)]
