"""The deferred lane (ingest/engine/runtime/lane.py) and the committer's gathering of deferred writes
(ingest/engine/writes/commits.py): deferred steps take turns per process, a slow one delays the others by
at most the lane's wait, and a batch of deferred writes gathers for a few milliseconds unless a
thread comes to wait on it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction

from ingest.engine import Workflow, create
from ingest.engine.clock import now
from ingest.engine.models import Instance, Step
from ingest.engine.runtime import lane
from ingest.engine.sql import instances as sql_instances
from ingest.engine.worker.loop import Worker
from ingest.engine.worker.turns import claim
from ingest.engine.writes import commits

LEASE = timedelta(minutes=5)
INTERVALS: list[tuple[str, float, float]] = []
_intervals_lock = threading.Lock()
meet = threading.Barrier(2, timeout=10)


def _timed(label: str, seconds: float) -> str:
    start = time.monotonic()
    time.sleep(seconds)
    with _intervals_lock:
        INTERVALS.append((label, start, time.monotonic()))
    return label


class Bookkeeping(Workflow):
    """Three short deferred steps, then an immediate one."""

    name = "t-lane-bookkeeping"

    def run(self, event, step):
        for i in range(3):
            step.do(f"write-{i}", lambda ctx, i=i: _timed(f"{ctx.instance_id}/write-{i}", 0.005), checkpoint="deferred")
        return step.do("after", lambda ctx: "done")


class Meeting(Workflow):
    """One deferred step that returns only once another instance's has reached the same point."""

    name = "t-lane-meeting"

    def run(self, event, step):
        return step.do("meet", lambda ctx: meet.wait(), checkpoint="deferred")


class Immediate(Workflow):
    name = "t-lane-immediate"

    def run(self, event, step):
        return step.do("call", lambda ctx: "called")


class Idle(Workflow):
    name = "t-lane-idle"

    def run(self, event, step):
        return None


def max_overlap(intervals: list[tuple[str, float, float]]) -> int:
    edges = sorted(
        [(start, 1) for _, start, _ in intervals] + [(end, -1) for _, _, end in intervals], key=lambda e: (e[0], e[1])
    )
    running = peak = 0
    for _, delta in edges:
        running += delta
        peak = max(peak, running)
    return peak


@pytest.fixture(autouse=True)
def _reset():
    INTERVALS.clear()
    meet.reset()
    lane.reset()
    yield
    INTERVALS.clear()
    lane.reset()


def run_all(instance_ids: list[str], *, concurrency: int) -> None:
    worker = Worker(concurrency=concurrency, poll_seconds=0.02).start()
    try:
        deadline = time.monotonic() + 60
        while Instance.objects.filter(id__in=instance_ids).exclude(status__in=["complete", "errored"]).exists():
            assert time.monotonic() < deadline, "the instances did not finish"
            time.sleep(0.02)
    finally:
        assert worker.stop(timeout=30)


LEFT: list[float] = []  # when the holder left the lane


def one_lane(settings, monkeypatch, *, wait: float) -> None:
    settings.RUNLEDGER_DEFERRED_LANE = 1
    monkeypatch.setattr(lane, "WAIT_SECONDS", wait)


@contextlib.contextmanager
def lane_held():
    """Another thread holds the lane (for 30 s at most) until the block ends."""
    holding, release = threading.Event(), threading.Event()
    LEFT.clear()

    def hold():
        with lane.deferred_step() as held:
            assert held
            holding.set()
            release.wait(30)
        LEFT.append(time.monotonic())

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    try:
        yield
    finally:
        release.set()
        holder.join(40)


# ---- the lane ----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_instances_run_their_deferred_steps_one_at_a_time(settings, monkeypatch):
    one_lane(settings, monkeypatch, wait=30.0)  # strictly one at a time, however slow the host
    ids = [f"book-{i}" for i in range(4)]
    for instance_id in ids:
        create("t-lane-bookkeeping", id=instance_id)
    run_all(ids, concurrency=4)
    assert sorted(Instance.objects.filter(id__in=ids).values_list("status", flat=True)) == ["complete"] * 4
    assert sorted(label for label, _, _ in INTERVALS) == sorted(f"{i}/write-{n}" for i in ids for n in range(3))
    assert max_overlap(INTERVALS) == 1
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_with_the_lane_off_deferred_steps_of_two_instances_run_together(settings, monkeypatch):
    settings.RUNLEDGER_DEFERRED_LANE = 0
    monkeypatch.setattr(lane, "WAIT_SECONDS", 30.0)
    for instance_id in ("meet-a", "meet-b"):
        create("t-lane-meeting", id=instance_id)
    run_all(["meet-a", "meet-b"], concurrency=2)
    # Each step returned only once the other had reached the barrier: they ran at the same time.
    assert sorted(Instance.objects.filter(id__in=["meet-a", "meet-b"]).values_list("status", flat=True)) == [
        "complete",
        "complete",
    ]
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_by_default_there_is_no_lane_and_deferred_steps_of_two_instances_run_together(monkeypatch):
    # The lane costs CPU per call (a sleep and a wake-up per step that finds it held): it is
    # off unless configured. Were it on, the second step would wait its 30 s for the lane and
    # the first would give up meeting it after 10.
    monkeypatch.setattr(lane, "WAIT_SECONDS", 30.0)
    for instance_id in ("default-a", "default-b"):
        create("t-lane-meeting", id=instance_id)
    run_all(["default-a", "default-b"], concurrency=2)
    assert sorted(Instance.objects.filter(id__in=["default-a", "default-b"]).values_list("status", flat=True)) == [
        "complete",
        "complete",
    ]
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_deferred_step_that_waited_out_the_lane_runs_beside_the_one_holding_it(settings, monkeypatch):
    one_lane(settings, monkeypatch, wait=0.05)
    with lane_held():
        create("t-lane-bookkeeping", id="beside")
        run_all(["beside"], concurrency=1)
    assert Instance.objects.get(id="beside").status == "complete"
    assert len(INTERVALS) == 3
    # All three ran while the holder still held the lane.
    assert LEFT and max(end for _, _, end in INTERVALS) < LEFT[0]
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_once_the_holder_has_held_the_lane_for_its_wait_others_do_not_wait_at_all(settings, monkeypatch):
    one_lane(settings, monkeypatch, wait=30.0)
    with lane_held():
        # The holder is a slow step: it took the lane longer than a wait ago, so the lane counts
        # as clogged from now on (the clock moved back instead of a test sleeping out the wait).
        held = lane._current()
        assert held is not None
        with held._cond:
            held._since = {key: since - 60.0 for key, since in held._since.items()}
        create("t-lane-bookkeeping", id="clogged")
        started = time.monotonic()
        run_all(["clogged"], concurrency=1)
        took = time.monotonic() - started
    assert Instance.objects.get(id="clogged").status == "complete"
    # Three deferred steps, none of which waited its own 30 s (the first alone would outlast this bound).
    assert took < 15, f"the deferred steps took {took:.1f} s"
    assert LEFT and max(end for _, _, end in INTERVALS) < LEFT[0]
    connection.close()


def test_no_step_waits_for_the_lane_longer_than_its_wait_however_young_the_holder(monkeypatch):
    # A lane whose holders keep changing never counts as clogged; simulated here by a holder
    # whose time in the lane never grows. A step still waits only WAIT_SECONDS for it.
    monkeypatch.setattr(lane, "WAIT_SECONDS", 0.2)
    busy = lane.Lane(1)
    busy._since[-1] = time.monotonic() + 30
    started = time.monotonic()
    assert busy.enter() is None  # it runs beside the lane
    waited = time.monotonic() - started
    assert 0.15 < waited < 10, f"waited {waited:.2f} s"


@pytest.mark.django_db(transaction=True)
def test_immediate_steps_do_not_wait_for_the_lane(settings, monkeypatch):
    one_lane(settings, monkeypatch, wait=30.0)
    with lane_held():
        create("t-lane-immediate", id="immediate")
        started = time.monotonic()
        run_all(["immediate"], concurrency=1)
        waited = time.monotonic() - started
        assert Instance.objects.get(id="immediate").output == "called"
        assert waited < 20, f"the immediate step waited {waited:.1f} s for the lane"
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_inside_an_atomic_block_a_deferred_step_does_not_wait_for_the_lane(settings, monkeypatch):
    one_lane(settings, monkeypatch, wait=30.0)
    with lane_held():
        started = time.monotonic()
        # The thread may hold row locks the step in the lane needs: it must not wait on it.
        with transaction.atomic(), lane.deferred_step() as held:
            assert held is False
        assert time.monotonic() - started < 20


# ---- the committer gathers deferred writes (PostgreSQL) ---------------------------------------


@pytest.fixture
def group(group_commits):
    return group_commits[0]


def claimed(*instance_ids: str) -> str:
    for instance_id in instance_ids:
        create("t-lane-idle", id=instance_id)
    token, got = claim(worker_id="test-worker", limit=len(instance_ids), lease=LEASE)
    assert sorted(c.id for c in got) == sorted(instance_ids)
    return token


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("require_postgres")
def test_deferred_writes_that_follow_within_the_gathering_share_one_batch(group, step_completion, monkeypatch):
    # A gathering longer than any test: the batch ends when the first wait() below comes for it,
    # never because a busy machine took long between two submits.
    monkeypatch.setattr(commits, "GATHER_SECONDS", 30.0)
    token = claimed("gather-1", "gather-2")
    first = group.submit(step_completion("gather-1", "a", position=0, token=token))
    time.sleep(0.2)  # without gathering, the committer would have written the first one alone by now
    second = group.submit(step_completion("gather-1", "b", position=1, token=token))
    third = group.submit(step_completion("gather-2", "a", position=0, token=token))
    assert all(p.wait() is not None for p in (first, second, third))
    assert (group.batches, group.writes) == (1, 3)
    assert sorted(Step.objects.values_list("instance_id", "name", "result")) == [
        ("gather-1", "a", "a"),
        ("gather-1", "b", "b"),
        ("gather-2", "a", "a"),
    ]
    connection.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("require_postgres")
def test_a_thread_that_comes_to_wait_ends_the_gathering(group, step_completion, monkeypatch):
    monkeypatch.setattr(commits, "GATHER_SECONDS", 30.0)
    token = claimed("hurry-1", "hurry-2")
    # A write queued behind a gathering batch (an instance's completion) is not kept waiting.
    queued = group.submit(step_completion("hurry-1", "a", position=0, token=token))
    started = time.monotonic()
    assert group.complete(sql_instances.InstanceDone(iid="hurry-2", token=token, now=now(), output='"ok"')) is True
    assert time.monotonic() - started < 20, "the waited write sat out the gathering"
    assert queued.wait() is not None
    assert Instance.objects.get(id="hurry-2").status == "complete"
    # Nor is a barrier that waits on a deferred write.
    alone = group.submit(step_completion("hurry-1", "b", position=1, token=token))
    started = time.monotonic()
    assert alone.wait() is not None
    assert time.monotonic() - started < 20, "the barrier sat out the gathering"
    assert sorted(Step.objects.filter(instance_id="hurry-1").values_list("name", flat=True)) == ["a", "b"]
    connection.close()
