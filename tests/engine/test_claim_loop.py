"""The worker's claim loop: when it looks up the next wake-up, and when it does not."""

from __future__ import annotations

import pytest

from ingest.engine.worker import loop
from ingest.engine.worker.loop import Worker


def _run_loop(monkeypatch: pytest.MonkeyPatch, worker: Worker, *, rounds: int) -> list[object]:
    """Run the claim loop for `rounds` waits; return the instants next_due was asked after."""
    looked: list[object] = []
    monkeypatch.setattr(loop.sql_lease, "next_due", lambda *, now: looked.append(now))
    monkeypatch.setattr(loop, "claim", lambda **kw: ("token", []))
    monkeypatch.setattr(loop.pg, "replace_stale_connection", lambda: None)
    # A database test that ran before in this process may have left this thread's connection
    # open; checking it would be database access, which this test has none of.
    monkeypatch.setattr(loop, "close_old_connections", lambda: None)
    waits = []

    def wait(timeout: float | None = None) -> bool:
        waits.append(timeout)
        if len(waits) >= rounds:
            worker.draining.set()
        return True

    monkeypatch.setattr(worker.wake, "wait", wait)
    worker.liveness = None
    worker._claim_loop()
    return looked


def test_a_full_house_claims_again_without_looking_up_the_next_wake_up(monkeypatch):
    worker = Worker(concurrency=1, poll_seconds=0.01)
    worker._inflight["busy"] = "token"  # its one slot is taken
    assert _run_loop(monkeypatch, worker, rounds=3) == []


def test_an_empty_claim_looks_up_the_next_wake_up(monkeypatch):
    worker = Worker(concurrency=1, poll_seconds=0.01)
    looked = _run_loop(monkeypatch, worker, rounds=3)
    assert len(looked) == 3
