"""The watch for dead workers (worker/liveness.py): an owner is dead once this session has seen it
without its liveness lock for the whole grace period; a glimpse is not enough."""

from __future__ import annotations

import pytest

from ingest.engine.worker.liveness import overdue

pytestmark = pytest.mark.pure


def test_an_owner_absent_for_the_whole_grace_period_is_dead():
    seen, dead = overdue({}, ["w1"], now=10.0, grace=2.0, me="w0")
    assert seen == {"w1": 10.0} and dead == []
    seen, dead = overdue(seen, ["w1"], now=11.5, grace=2.0, me="w0")
    assert dead == []
    seen, dead = overdue(seen, ["w1"], now=12.0, grace=2.0, me="w0")
    assert dead == ["w1"]


def test_an_owner_that_took_its_lock_again_starts_afresh():
    seen, _ = overdue({}, ["w1"], now=10.0, grace=2.0, me="w0")
    seen, dead = overdue(seen, [], now=11.0, grace=2.0, me="w0")  # reconnected after a restart
    assert seen == {} and dead == []
    seen, dead = overdue(seen, ["w1"], now=12.5, grace=2.0, me="w0")
    assert seen == {"w1": 12.5} and dead == []


def test_a_worker_never_declares_itself_dead():
    seen, dead = overdue({"w0": 0.0}, ["w0"], now=100.0, grace=2.0, me="w0")
    assert seen == {} and dead == []
