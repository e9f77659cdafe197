"""Start markers (ingest/engine/runtime/markers.py): when the markers' thread wakes. It sleeps
until the first marker still wanted falls due, not a tick at a time, so a worker whose steps
settle their markers before they fall due does not wake the thread per step or per tick; a
marker still wanted is written between RUNLEDGER_MARKER_MS and that plus TICK_SECONDS."""

from __future__ import annotations

import collections
from datetime import UTC, datetime

import pytest

from ingest.engine.runtime import markers
from ingest.engine.runtime.markers import (
    CANCELLED,
    PENDING,
    TICK_SECONDS,
    WRITTEN,
    Marker,
    sleep_seconds,
)
from ingest.engine.sql.steps import StepRow

ROW = StepRow(
    iid="i-1", name="s", seq=1, position=0, kind="do", config="{}", sensitive=False, has_rollback=False, label="s"
)


def marker(due: float, state: str = PENDING) -> Marker:
    return Marker(row=ROW, token="t", started=datetime(2026, 1, 1, tzinfo=UTC), attempt=1, due=due, state=state)


def test_the_thread_sleeps_until_the_first_wanted_marker_falls_due_plus_a_tick():
    queue = collections.deque([marker(10.0, CANCELLED), marker(10.02, WRITTEN), marker(10.08), marker(10.09)])
    assert sleep_seconds(queue, 10.0) == pytest.approx(0.08 + TICK_SECONDS)
    # The settled markers ahead of it are dropped; the wanted ones stay, in due order.
    assert [m.due for m in queue] == [10.08, 10.09]


def test_a_marker_that_fell_due_is_written_at_once():
    queue = collections.deque([marker(9.0, CANCELLED), marker(9.5), marker(11.0)])
    assert sleep_seconds(queue, 10.0) == 0.0
    assert [m.due for m in queue] == [9.5, 11.0]


def test_with_every_marker_settled_the_thread_sleeps_until_a_step_schedules_one():
    queue = collections.deque([marker(9.0, CANCELLED), marker(10.5, CANCELLED)])
    assert sleep_seconds(queue, 10.0) is None
    assert not queue


class FakeConnection:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_a_marker_due_is_written_and_one_settled_first_is_not(monkeypatch):
    # The thread itself, without the database: one marker settles before it falls due, the
    # other is still wanted when it does and is written (by a stand-in for the statement).
    written: list[str] = []

    def mark_started(raw, *, row, token, now, started, attempt):
        written.append(row.label)
        return 7

    monkeypatch.setattr(markers.sql_steps, "step_mark_started", mark_started)
    queue = markers.Markers()
    monkeypatch.setattr(queue, "_connect", FakeConnection)
    monkeypatch.setattr(markers, "_markers", queue)
    from django.test import override_settings

    with override_settings(RUNLEDGER_MARKER_MS=30):
        settled = queue.schedule(
            row=StepRow(**{**ROW.__dict__, "label": "quick"}),
            token="t",
            started=datetime(2026, 1, 1, tzinfo=UTC),
            attempt=1,
        )
        slow = queue.schedule(
            row=StepRow(**{**ROW.__dict__, "label": "slow"}),
            token="t",
            started=datetime(2026, 1, 1, tzinfo=UTC),
            attempt=1,
        )
        assert settled.settle() is False
        with queue.cond:
            assert queue.cond.wait_for(lambda: slow.state == WRITTEN, timeout=10)
    assert slow.settle() is True and slow.step_id == 7
    assert written == ["slow"]
