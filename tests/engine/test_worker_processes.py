"""Real worker processes on PostgreSQL: crashes, drains, many workers, many sleepers.

These tests start `manage.py worker` processes against a throwaway database and read the ledger
and the steps' side effects (`e2e_effects`) to prove what ran, how often, and where.
"""

from __future__ import annotations

import json
import signal

import pytest

from tests.conftest import PG_URL
from tests.engine.procs import Database, python, start_worker, start_workers, stop, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

SLEEPERS = 2000
SLEEPERS_LEASE = 60.0  # a sleeper left to its lease would wake this late


@pytest.fixture
def db():
    with Database(PG_URL) as database:
        yield database


def status_counts(db: Database, workflow: str) -> dict[str, int]:
    rows = db.execute("SELECT status, count(*) FROM engine_instance WHERE workflow = %s GROUP BY status", (workflow,))
    return dict(rows)


def kill_inside_the_slow_step(db: Database, tmp_path, iid: str, *, before_kill, env=None) -> None:
    """Start `e2e-crash-me` as `iid`, SIGKILL its worker inside the slow step (after
    `before_kill()`), let a second worker finish it, and check that only the slow step ran
    again, with the same idempotency key."""
    python(db, f"from ingest.engine import create; create('e2e-crash-me', id={iid!r}, params={{'hold': 3.0}})")
    first = start_worker(db, lease=2.0, log=tmp_path / "w1.log", env=env)
    wait_for(
        lambda: db.execute("SELECT 1 FROM e2e_effects WHERE step = 'slow'"), timeout=60, what="the slow step to start"
    )
    before_kill()
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    second = start_worker(db, lease=2.0, log=tmp_path / "w2.log")
    try:
        wait_for(
            lambda: db.execute("SELECT 1 FROM engine_instance WHERE id = %s AND status = 'complete'", (iid,)),
            timeout=60,
            what="the instance to complete on the second worker",
        )
    finally:
        assert stop(second) == 0
    runs = db.execute(
        "SELECT step, count(*), count(DISTINCT pid), count(DISTINCT idempotency_key) "
        "FROM e2e_effects GROUP BY step ORDER BY step"
    )
    assert runs == [("after", 1, 1, 1), ("before-1", 1, 1, 1), ("before-2", 1, 1, 1), ("slow", 2, 2, 1)]


def test_a_worker_killed_inside_a_step_loses_nothing_and_reruns_only_that_step(db, tmp_path):
    # A step still running after RUNLEDGER_MARKER_MS has its start marker written: the replay
    # sees an attempt under way and records it as lost.
    kill_inside_the_slow_step(
        db,
        tmp_path,
        "crash-1",
        before_kill=lambda: wait_for(
            lambda: db.execute("SELECT 1 FROM engine_step WHERE name = 'slow' AND status = 'running'"),
            timeout=10,
            what="the slow step's start marker",
        ),
    )
    attempts = db.execute(
        "SELECT a.number, a.ok, a.error_name FROM engine_attempt a JOIN engine_step s ON s.id = a.step_id "
        "WHERE s.name = 'slow' ORDER BY a.number"
    )
    assert attempts == [(1, False, "WorkerLost"), (2, True, "")]


def test_a_worker_killed_before_the_start_marker_reruns_the_step_as_its_first_attempt(db, tmp_path):
    # The start marker is not written yet (RUNLEDGER_MARKER_MS is a minute): nothing of the
    # interrupted attempt is in the ledger, so the replay runs it again as attempt 1.
    def no_row_yet() -> None:
        assert db.execute("SELECT count(*) FROM engine_step WHERE instance_id = 'crash-2' AND name = 'slow'") == [(0,)]

    kill_inside_the_slow_step(db, tmp_path, "crash-2", before_kill=no_row_yet, env={"RUNLEDGER_MARKER_MS": "60000"})
    attempts = db.execute(
        "SELECT a.number, a.ok FROM engine_attempt a JOIN engine_step s ON s.id = a.step_id "
        "WHERE s.name = 'slow' ORDER BY a.number"
    )
    assert attempts == [(1, True)]
    history = db.execute(
        "SELECT kind FROM engine_history WHERE instance_id = 'crash-2' AND step_name = 'slow' ORDER BY id"
    )
    assert history == [("step.started",), ("step.completed",)]


def test_sigterm_drains_the_running_step_then_exits_zero(db, tmp_path):
    python(db, "from ingest.engine import create; create('e2e-crash-me', id='drain-1', params={'hold': 2.0})")
    worker = start_worker(db, lease=30.0, log=tmp_path / "w.log")
    wait_for(lambda: db.execute("SELECT 1 FROM e2e_effects WHERE step = 'slow'"), timeout=60, what="the slow step")
    assert stop(worker, signal.SIGTERM, timeout=30) == 0
    assert db.execute("SELECT ended IS NOT NULL FROM e2e_effects WHERE step = 'slow'") == [(True,)]
    row = db.execute("SELECT status, lease_token, ready_at <= now() FROM engine_instance WHERE id = 'drain-1'")
    assert row == [("running", "", True)]  # released, runnable at once by the next worker
    assert db.execute("SELECT status FROM engine_step WHERE name = 'after'") == []
    again = start_worker(db, log=tmp_path / "w2.log")
    try:
        wait_for(
            lambda: db.execute("SELECT 1 FROM engine_instance WHERE id='drain-1' AND status='complete'"),
            timeout=60,
            what="completion after the drain",
        )
    finally:
        stop(again)
    assert db.execute("SELECT count(*) FROM e2e_effects WHERE step = 'slow'") == [(1,)]


def test_a_thousand_instances_through_four_workers_complete_once_each(db, tmp_path):
    python(
        db,
        "from ingest.engine import create_batch\n"
        "for b in range(10):\n"
        "    create_batch('e2e-three-effects', [{'id': f'many-{b}-{i}', 'params': {'n': i}} for i in range(100)])",
    )
    workers = start_workers(db, 4, log_dir=tmp_path, concurrency=8, lease=10.0)
    try:
        wait_for(
            lambda: status_counts(db, "e2e-three-effects") == {"complete": 1000},
            timeout=300,
            interval=0.5,
            what="1,000 instances to complete",
        )
    finally:
        codes = [stop(w) for w in workers]
    assert codes == [0, 0, 0, 0]
    assert db.execute("SELECT count(*), count(DISTINCT (instance_id, step)) FROM e2e_effects") == [(3000, 3000)]
    pids = db.execute("SELECT count(DISTINCT pid) FROM e2e_effects")[0][0]
    assert pids == 4  # every worker took part
    overlaps = db.execute(
        "SELECT count(*) FROM e2e_effects a JOIN e2e_effects b ON a.instance_id = b.instance_id AND a.id < b.id "
        "AND a.pid <> b.pid AND a.started < b.ended AND b.started < a.ended"
    )
    assert overlaps == [(0,)]


def test_two_thousand_sleepers_wake_at_their_due_time_not_a_lease_later(db, tmp_path):
    # The behaviour at a scale that ends well inside the test timeout on a busy machine; 10,000 sleepers
    # did not on a loaded two-core machine (20,000 turns). Scale is bench/engine.py's (100,000).
    workers = start_workers(db, 2, log_dir=tmp_path, concurrency=16, lease=SLEEPERS_LEASE, poll=1.0)
    try:
        # All go to sleep first; their due times then spread over 30 s, starting 60 s from now.
        python(
            db,
            "from datetime import timedelta\n"
            "from ingest.engine import create_batch\n"
            "from ingest.engine.clock import now\n"
            "first = now() + timedelta(seconds=60)\n"
            "for b in range(20):\n"
            "    create_batch('e2e-sleep-until', [{'id': f'sleep-{b}-{i}', 'params': {'until': "
            "(first + timedelta(seconds=(b * 100 + i) * 0.015)).isoformat()}} for i in range(100)])",
            timeout=120,
        )
        wait_for(
            lambda: status_counts(db, "e2e-sleep-until") == {"complete": SLEEPERS},
            timeout=200,
            interval=1.0,
            what="2,000 sleepers to wake and complete",
        )
    finally:
        for w in workers:
            stop(w)
    slept = db.execute(
        "SELECT count(*) FROM engine_history h JOIN engine_step s ON s.instance_id = h.instance_id AND s.name = 'nap' "
        "WHERE h.kind = 'step.sleep' AND h.created_at < s.wake_at"
    )
    lags = [
        float(row[0])
        for row in db.execute(
            "SELECT extract(epoch FROM ended_at - wake_at) FROM engine_step WHERE name = 'nap' ORDER BY 1"
        )
    ]
    p99 = lags[int(len(lags) * 0.99)]
    print(
        json.dumps(
            {
                "slept": slept[0][0],
                "wake_lag_p50_s": lags[len(lags) // 2],
                "wake_lag_p99_s": p99,
                "wake_lag_max_s": lags[-1],
            }
        )
    )
    assert slept == [(SLEEPERS,)]  # every one of them was asleep before its due time
    assert len(lags) == SLEEPERS and lags[0] >= 0
    # Behaviour, not a figure (bench/engine.py measures the wake-lag percentiles): every sleeper is woken by its
    # timer or the next poll (a second here), and none waits out a lease. A bound of one poll failed once at
    # 1.03 s on a loaded two-core machine; half the lease tells woken from left behind on any machine.
    assert lags[-1] < SLEEPERS_LEASE / 2, f"the slowest wake-up was {lags[-1]:.3f} s late (p99 {p99:.3f} s)"
