"""A worker killed with SIGKILL: its instances are taken over soon after its death (its
PostgreSQL session, which holds its liveness lock, ends with it), not when their leases expire,
never while it lives, and the money its attempts held on budgets is given back.

How soon (about three seconds: the two-second grace and a scan) is bench/faults.py's figure; the
test only tells the liveness watch from the lease, with half a lease of margin."""

from __future__ import annotations

import signal
import time

import pytest

from tests.conftest import PG_URL
from tests.engine.faults import (
    FaultDatabase,
    completed_steps_rerun,
    held_reservations,
    overlapping_runs,
)
from tests.engine.procs import python, start_worker, stop, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

LEASE = 60.0  # without liveness, a dead worker's instances would wait this long


@pytest.fixture
def db():
    with FaultDatabase(PG_URL) as database:
        yield database


def leased_by(db: FaultDatabase, pid: int) -> list[str]:
    return [
        row[0]
        for row in db.execute(
            "SELECT id FROM engine_instance WHERE lease_owner LIKE %s AND lease_expires_at > now()", (f"%:{pid}:%",)
        )
    ]


def test_a_killed_workers_instances_are_taken_over_long_before_their_leases_expire(db, tmp_path):
    python(
        db,
        "from ingest.engine import create_batch\n"
        "create_batch('e2e-five-steps', [{'id': f'k-{i}', 'params': {'hold': 3.0}} for i in range(16)])",
    )
    victim = start_worker(db, concurrency=8, lease=LEASE, log=tmp_path / "victim.log")
    try:
        wait_for(lambda: len(leased_by(db, victim.pid)) == 8, timeout=60, what="the victim to hold 8 instances")
        # Room for the victim's instances beside its own share. Steps of 3 s: however long the
        # survivor takes to start on a busy machine, the victim is inside a run of 15 s when it dies.
        survivor = start_worker(db, concurrency=16, lease=LEASE, log=tmp_path / "survivor.log")
        try:
            wait_for(lambda: leased_by(db, victim.pid), timeout=60, what="the victim to hold instances")
            held = leased_by(db, victim.pid)
            victim.send_signal(signal.SIGKILL)
            victim.wait(timeout=10)
            killed_at = time.time()
            wait_for(
                lambda: db.execute("SELECT count(*) FROM engine_instance WHERE status = 'complete'")[0][0] == 16,
                timeout=120,
                interval=0.2,
                what="every instance to complete on the survivor",
            )
        finally:
            assert stop(survivor) == 0
    finally:
        if victim.poll() is None:  # a failure before the kill must not leave it running
            victim.kill()
            victim.wait(timeout=10)
    taken = [
        float(row[0]) - killed_at
        for row in db.execute(
            "SELECT min(started) FROM e2e_effects WHERE instance_id = ANY(%s) AND pid = %s GROUP BY instance_id",
            (held, survivor.pid),
        )
    ]
    assert len(taken) == len(held) > 0
    assert max(taken) < LEASE / 2, f"the survivor took a dead worker's instance over after {max(taken):.2f} s"
    assert overlapping_runs(db) == 0
    assert completed_steps_rerun(db) == 0


def test_a_living_workers_instances_are_never_taken_from_it(db, tmp_path):
    # Two workers, steps of 2 s, for 12 s: liveness must not hand a living worker's instances to
    # the other, however long its steps run.
    python(
        db,
        "from ingest.engine import create_batch\n"
        "create_batch('e2e-five-steps', [{'id': f'l-{i}', 'params': {'hold': 2.0}} for i in range(8)])",
    )
    first = start_worker(db, concurrency=4, lease=LEASE, log=tmp_path / "w1.log")
    second = start_worker(db, concurrency=4, lease=LEASE, log=tmp_path / "w2.log")
    try:
        wait_for(
            lambda: db.execute("SELECT count(*) FROM engine_instance WHERE status = 'complete'")[0][0] == 8,
            timeout=120,
            interval=0.5,
            what="every instance to complete",
        )
    finally:
        assert stop(first) == 0 and stop(second) == 0
    assert db.execute(
        "SELECT count(*) FROM (SELECT instance_id FROM e2e_effects GROUP BY instance_id "
        "HAVING count(DISTINCT pid) > 1) x"
    ) == [(0,)]
    assert db.execute("SELECT count(*) FROM e2e_effects") == [(40,)]


def test_a_killed_workers_budget_reservations_are_released(db, tmp_path):
    python(
        db,
        "from decimal import Decimal\n"
        "from ingest.engine.clock import now\n"
        "from ingest.engine.models import Budget\n"
        "from ingest.engine.periods import period_start\n"
        "Budget.objects.create(scope='service', key='e2e-llm', period='day', limit=Decimal('1000'),\n"
        "                      period_start=period_start('day', now()), updated_at=now())\n"
        "from ingest.engine import create_batch\n"
        "create_batch('e2e-costed', [{'id': f'c-{i}', 'params': {'hold': 0.5}} for i in range(16)])",
    )
    victim = start_worker(db, concurrency=8, lease=LEASE, log=tmp_path / "victim.log")
    try:
        wait_for(lambda: held_reservations(db) >= 6, timeout=60, what="the victim's steps to hold money")
    finally:
        victim.send_signal(signal.SIGKILL)  # also when the wait failed: it must not outlive the test
        victim.wait(timeout=10)
    assert held_reservations(db) >= 6  # nobody gave them back: the worker is dead
    survivor = start_worker(db, concurrency=8, lease=LEASE, log=tmp_path / "survivor.log")
    try:
        wait_for(
            lambda: db.execute("SELECT count(*) FROM engine_instance WHERE status = 'complete'")[0][0] == 16,
            timeout=120,
            interval=0.2,
            what="every instance to complete",
        )
        wait_for(lambda: held_reservations(db) == 0, timeout=10, what="the dead attempts' reservations to go")
    finally:
        assert stop(survivor) == 0
    [(reserved, spent)] = db.execute("SELECT reserved, spent FROM engine_budget")
    assert reserved == 0
    # 48 steps × 0.5; an attempt killed between recording its cost and its completion spent too.
    assert 24 <= spent <= 24 + 8 * 0.5
