"""The background loop shared by the cron scheduler and the rollup runner (ingest/engine/periodic.py)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from ingest.engine.periodic import Periodic

pytestmark = pytest.mark.pure

T0 = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)


class Recorder(Periodic):
    """Rounds that do what the test scripts: `script[n]` is round n+1 (raise, stop, or nothing)."""

    thread_name = "test-periodic"
    round_name = "recorder round"
    log = logging.getLogger("tests.periodic")

    def __init__(self, *, interval: float = 0.0, script: dict[int, str] | None = None) -> None:
        super().__init__(interval=interval)
        self.script = script or {}
        self.rounds: list[datetime] = []
        self.errors_seen = 0
        self.exits = 0
        self.round_done = threading.Event()

    def run_once(self, clock: Callable[[], datetime]) -> None:
        self.rounds.append(clock())
        self.round_done.set()
        match self.script.get(len(self.rounds)):
            case "raise":
                raise RuntimeError(f"round {len(self.rounds)} broke")
            case "stop":
                self.request_stop()
            case "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)

    def after_error(self) -> None:
        self.errors_seen += 1

    def at_exit(self) -> None:
        self.exits += 1


def test_it_runs_rounds_with_the_given_clock_until_a_round_asks_it_to_stop():
    loop = Recorder(script={3: "stop"})
    loop.run(clock=lambda: T0)
    assert loop.rounds == [T0, T0, T0]
    assert loop.stopping
    assert loop.exits == 1


def test_a_failing_round_is_logged_and_forgotten_and_the_next_round_comes_as_usual(caplog):
    loop = Recorder(script={1: "raise", 2: "raise", 4: "stop"})
    with caplog.at_level(logging.ERROR, logger="tests.periodic"):
        loop.run(clock=lambda: T0)
    assert len(loop.rounds) == 4
    assert loop.errors_seen == 2
    failures = [r for r in caplog.records if r.name == "tests.periodic"]
    assert [r.getMessage() for r in failures] == ["recorder round failed; retrying in 0.0 s"] * 2
    assert all(r.exc_info and "round 1 broke" in str(r.exc_info[1]) for r in failures[:1])
    assert loop.exits == 1


def test_at_exit_runs_once_even_when_it_is_asked_to_stop_before_the_first_round():
    loop = Recorder()
    loop.request_stop()
    loop.run(clock=lambda: T0)
    assert loop.rounds == []
    assert loop.exits == 1


def test_start_runs_the_loop_in_a_named_daemon_thread_that_stop_ends():
    loop = Recorder(interval=0.01)
    thread = loop.start()
    assert loop.round_done.wait(30.0)
    assert thread.name == "test-periodic"
    assert thread.daemon
    loop.stop(timeout=5.0)
    assert not thread.is_alive()
    rounds = len(loop.rounds)
    assert rounds >= 1
    assert loop.exits == 1
    loop.round_done.clear()
    assert not loop.round_done.wait(0.05)  # no round after stop
    assert len(loop.rounds) == rounds


def test_it_waits_the_interval_between_rounds_and_a_stop_cuts_the_wait_short():
    loop = Recorder(interval=120.0)
    thread = loop.start()
    assert loop.round_done.wait(30.0)
    loop.stop(timeout=30.0)  # returns at once; a stop that waited for the interval would not be over by then
    assert not thread.is_alive()
    assert len(loop.rounds) == 1


def test_run_until_signalled_ends_after_the_round_in_which_sigterm_came_and_puts_the_handlers_back():
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    loop = Recorder(script={2: "sigterm"})
    loop.run_until_signalled(clock=lambda: T0)
    assert loop.rounds == [T0, T0]
    assert loop.exits == 1
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_loop_without_a_round_cannot_be_built():
    class NoRound(Periodic):
        pass

    with pytest.raises(TypeError, match="run_once"):
        NoRound(interval=1.0)  # type: ignore[abstract]
