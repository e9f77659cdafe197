"""A database that refuses writes (read-only, full, timing out): workers back off and say so in
the log, without an error loop, write nothing by halves, and carry on once it takes writes."""

from __future__ import annotations

import time

import pytest

from ingest.engine.backoff import Backoff, FailureLog
from tests.conftest import PG_URL
from tests.engine.faults import (
    FaultDatabase,
    alter_database,
    completed_steps_rerun,
    terminate_sessions,
)
from tests.engine.procs import python, start_workers, stop, wait_for


@pytest.mark.pure
def test_the_delay_doubles_from_fifty_milliseconds_up_to_its_cap():
    backoff = Backoff(first=0.05, cap=1.0)
    assert [backoff.delay(n) for n in range(1, 8)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff.delay(10_000) == 1.0  # no overflow however long the outage


@pytest.mark.pure
def test_a_failure_that_repeats_is_logged_at_once_then_every_thirty_seconds():
    log = FailureLog(every=30.0)
    assert log.failed(now=100.0) == (True, 1)
    assert log.failed(now=101.0) == (False, 2)
    assert log.failed(now=129.0) == (False, 3)
    assert log.failed(now=130.5) == (True, 4)  # four failures so far, the last one now
    assert log.recovered() == 4
    assert log.failed(now=131.0) == (True, 1)  # a new outage is news again
    assert log.recovered() == 1
    assert log.recovered() == 0


@pytest.mark.pure
def test_a_failure_whose_cause_changes_is_logged_again_at_once():
    log = FailureLog(every=30.0)
    assert log.failed(now=100.0, reason="terminating connection") == (True, 1)
    assert log.failed(now=100.5, reason="terminating connection") == (False, 2)
    assert log.failed(now=101.0, reason="read-only transaction") == (True, 3)  # news: a new cause
    assert log.failed(now=102.0, reason="read-only transaction") == (False, 4)
    assert log.recovered() == 4
    assert log.failed(now=103.0, reason="read-only transaction") == (True, 1)  # a new outage


@pytest.fixture
def db():
    with FaultDatabase(PG_URL) as database:
        yield database


@pytest.mark.postgres
@pytest.mark.e2e
def test_workers_back_off_while_the_database_is_read_only_and_finish_the_work_after(db, tmp_path):
    workers = start_workers(db, 2, log_dir=tmp_path, concurrency=8, lease=30.0, poll=0.2)
    try:
        python(
            db,
            "from ingest.engine import create_batch\n"
            "create_batch('e2e-five-steps', [{'id': f'ro-{i}', 'params': {'hold': 0.2}} for i in range(100)])",
        )
        wait_for(
            lambda: db.execute("SELECT count(*) FROM e2e_effects")[0][0] >= 40,
            timeout=60,
            what="the run to be under way",
        )
        alter_database(db, "SET default_transaction_read_only = on")
        terminate_sessions(db)  # new sessions are read-only: every write fails from now on
        before = [w.log_path.read_text().count("read-only") for w in workers]

        def said() -> list[int]:
            return [w.log_path.read_text().count("read-only") - b for w, b in zip(workers, before, strict=True)]

        wait_for(lambda: all(said()), timeout=60, what="each worker to say the database is read-only")
        time.sleep(4.0)  # four seconds more of failing writes: a worker that logs in a loop says it dozens of times
        during = said()
        alter_database(db, "RESET default_transaction_read_only")
        wait_for(
            lambda: db.execute("SELECT count(*) FROM engine_instance WHERE status = 'complete'")[0][0] == 100,
            timeout=120,
            interval=0.5,
            what="every instance to complete once writes are back",
        )
    finally:
        codes = [stop(w) for w in workers]
    assert codes == [0, 0]
    # Each worker said what was wrong, and did not say it in a loop.
    assert all(1 <= n <= 10 for n in during), during
    # Nothing by halves: every completed step has its successful attempt and its history.
    assert db.execute(
        "SELECT count(*) FROM engine_step s WHERE s.status = 'complete' AND NOT EXISTS "
        "(SELECT 1 FROM engine_attempt a WHERE a.step_id = s.id AND a.ok)"
    ) == [(0,)]
    assert db.execute(
        "SELECT count(*) FROM engine_step s WHERE s.status = 'complete' AND NOT EXISTS "
        "(SELECT 1 FROM engine_history h WHERE h.instance_id = s.instance_id "
        "AND h.step_name = s.name AND h.kind = 'step.completed')"
    ) == [(0,)]
    assert db.execute("SELECT count(*) FROM engine_step WHERE status = 'complete'") == [(500,)]
    # The read-only spell held the run up: it was under way on both sides of it.
    assert db.execute("SELECT count(*) FROM engine_instance WHERE ended_at > now() - interval '1 hour'") == [(100,)]
    assert completed_steps_rerun(db) == 0
