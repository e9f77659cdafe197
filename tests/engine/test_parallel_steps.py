"""Parallel groups (`step.all`, `step.all_settled`): the workflow's own thread runs the group's
steps with the free threads of the process's pool (RUNLEDGER_PARALLEL_THREADS), so a group is
never wider than the pool plus that thread, `concurrency` narrows one group, and a busy pool
never stalls a group.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from ingest.engine import Workflow, create
from ingest.engine.models import Instance
from ingest.engine.runtime import parallel

RUNS: list[tuple[int, int, float, float]] = []  # (step index, thread, start, end)
_runs_lock = threading.Lock()
BARRIERS: dict[str, threading.Barrier] = {}


def _work(i: int, *, meet: str | None = None) -> int:
    start = time.monotonic()
    if meet is not None:
        BARRIERS[meet].wait()  # returns only once the barrier's parties are all inside a step
    time.sleep(0.01)
    with _runs_lock:
        RUNS.append((i, threading.get_ident(), start, time.monotonic()))
    return i * i


def max_overlap() -> int:
    edges = sorted([(start, 1) for *_, start, _ in RUNS] + [(end, -1) for *_, end in RUNS])
    running = peak = 0
    for _, delta in edges:
        running += delta
        peak = max(peak, running)
    return peak


class Wide(Workflow):
    """Eight parallel steps; the first three meet at a barrier of three."""

    name = "t-parallel-wide"

    def run(self, event, step):
        return step.all(
            [step.call(f"part-{i}", lambda ctx, i=i: _work(i, meet="three" if i < 3 else None)) for i in range(8)]
        )


class Narrow(Workflow):
    """Six parallel steps at most two at a time; the first two meet at a barrier of two."""

    name = "t-parallel-narrow"

    def run(self, event, step):
        return step.all(
            [step.call(f"part-{i}", lambda ctx, i=i: _work(i, meet="two" if i < 2 else None)) for i in range(6)],
            concurrency=2,
        )


class Plain(Workflow):
    name = "t-parallel-plain"

    def run(self, event, step):
        return step.all([step.call(f"part-{i}", lambda ctx, i=i: _work(i)) for i in range(3)])


class BadWidth(Workflow):
    name = "t-parallel-bad-width"

    def run(self, event, step):
        return step.all([step.call("part", lambda ctx: 1)], concurrency=0)


@pytest.fixture(autouse=True)
def _reset():
    RUNS.clear()
    BARRIERS.clear()
    BARRIERS["three"] = threading.Barrier(3, timeout=20)
    BARRIERS["two"] = threading.Barrier(2, timeout=20)
    yield
    RUNS.clear()


def drain_in_thread(drain, timeout: float = 30) -> None:
    thread = threading.Thread(target=drain)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"the instance did not finish within {timeout:g} s"


@pytest.mark.django_db(transaction=True)
def test_a_group_runs_as_wide_as_the_pool_and_the_workflows_thread_and_no_wider(settings, drain):
    settings.RUNLEDGER_PARALLEL_THREADS = 2
    create("t-parallel-wide", id="wide")
    drain()
    inst = Instance.objects.get(id="wide")
    assert inst.status == "complete", inst.error_message
    assert inst.output == [i * i for i in range(8)]  # in the group's order
    assert sorted(i for i, *_ in RUNS) == list(range(8))
    # Three steps were inside at once (they met at the barrier), never more.
    assert max_overlap() == 3
    assert len({thread for _, thread, *_ in RUNS}) == 3
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_concurrency_narrows_one_group(settings, drain):
    settings.RUNLEDGER_PARALLEL_THREADS = 8
    create("t-parallel-narrow", id="narrow")
    drain()
    inst = Instance.objects.get(id="narrow")
    assert inst.status == "complete", inst.error_message
    assert inst.output == [i * i for i in range(6)]
    assert max_overlap() == 2
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_group_runs_on_the_workflows_thread_when_every_pool_thread_is_busy(settings, drain):
    settings.RUNLEDGER_PARALLEL_THREADS = 1
    _, pool = parallel._helpers()
    busy, release = threading.Event(), threading.Event()

    def occupy():
        busy.set()
        release.wait(60)

    pool.submit(occupy)
    assert busy.wait(10)
    try:
        create("t-parallel-plain", id="plain")
        drain_in_thread(drain)
        inst = Instance.objects.get(id="plain")
        assert inst.status == "complete", inst.error_message
        assert inst.output == [0, 1, 4]
        assert len({thread for _, thread, *_ in RUNS}) == 1  # the workflow's own thread ran all three
        assert not release.is_set()
    finally:
        release.set()
    connection.close()


@pytest.mark.django_db
def test_a_concurrency_below_one_is_refused_naming_it(drain):
    create("t-parallel-bad-width", id="bad-width")
    drain()
    inst = Instance.objects.get(id="bad-width")
    assert inst.status == "errored"
    assert inst.error_name == "InvalidStepConfig"
    assert "concurrency" in inst.error_message and "0" in inst.error_message
