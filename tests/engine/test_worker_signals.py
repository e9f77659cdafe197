"""Real worker processes told to stop once: at any moment of their start, each stops on the
first SIGTERM, drains, and leaves no lease held; the start and stop lines are JSON records when
the logs are JSON."""

from __future__ import annotations

import json
import signal
import statistics
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import PG_URL
from tests.engine.procs import Database, python, start_worker, stop, wait_for, wait_ready

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

# (when, seconds): SIGTERM that long after the start line ("started"), or after it while the
# worker claims and runs the queued instances ("claiming": the same, later); that long after the
# spawn ("spawn": Django is still setting up); or that fraction of the start-up the workers
# before took ("late": the end of Django's setup, when the handlers are set but the worker has
# not started its threads yet, or has just started them). The start-ups are timed first.
MOMENTS = [
    ("started", 0.0),
    ("started", 0.0),
    ("started", 0.01),
    ("started", 0.03),
    ("claiming", 0.2),
    ("claiming", 0.5),
    ("claiming", 0.9),
    ("claiming", 1.5),
    ("claiming", 2.5),
    ("claiming", 4.0),
    ("spawn", 0.0),
    ("spawn", 0.3),
    ("late", 0.85),
    ("late", 0.95),
    ("late", 1.0),
    ("late", 1.1),
    ("late", 1.2),
    ("late", 1.35),
    ("late", 1.5),
    ("late", 1.7),
]
BATCH = 4  # workers started at once: a restart of several, and a shared start-up's load


@pytest.fixture
def db():
    with Database(PG_URL) as database:
        yield database


def started(log: Path) -> bool:
    return b"started (concurrency" in log.read_bytes()


def terminate_once(proc: subprocess.Popen[bytes], when: str, seconds: float, outcome: dict[str, object]) -> None:
    """Send one SIGTERM at the moment named, then wait (never a second signal)."""
    log: Path = proc.log_path  # type: ignore[attr-defined]
    spawned = time.monotonic()
    if when in ("started", "claiming"):
        while not started(log) and proc.poll() is None and time.monotonic() - spawned < 90:
            time.sleep(0.002)
        outcome["boot"] = time.monotonic() - spawned
    time.sleep(seconds)
    proc.send_signal(signal.SIGTERM)
    try:
        outcome["code"] = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        outcome["code"] = None
        proc.kill()
        proc.wait()


def test_every_worker_stops_on_its_first_sigterm_at_any_moment_of_its_start_and_holds_no_lease(db, tmp_path):
    python(
        db,
        "from ingest.engine import create_batch\n"
        "for b in range(3):\n"
        "    create_batch('e2e-crash-me', [{'id': f'sig-{b}-{i}', 'params': {'hold': 0.2}} for i in range(40)])",
    )
    boots: list[float] = []
    for first in range(0, len(MOMENTS), BATCH):
        batch = [
            (n, (when, seconds * statistics.median(boots) if when == "late" else seconds))
            for n, (when, seconds) in enumerate(MOMENTS[first : first + BATCH], start=first)
        ]
        procs = [
            start_worker(
                db,
                lease=3.0,
                log=tmp_path / f"w{n}.log",
                wait=False,
                args=("--id", f"sig-worker-{n}"),
            )
            for n, _ in batch
        ]
        outcomes: list[dict[str, object]] = [{} for _ in batch]
        threads = [
            threading.Thread(target=terminate_once, args=(proc, when, seconds, out))
            for proc, (_, (when, seconds)), out in zip(procs, batch, outcomes, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        boots += [float(out["boot"]) for out in outcomes if "boot" in out]  # type: ignore[arg-type]
        for (n, (when, seconds)), out in zip(batch, outcomes, strict=True):
            log = (tmp_path / f"w{n}.log").read_text()
            assert out["code"] is not None, f"worker {n} ({when} +{seconds} s) ignored its SIGTERM for 60 s:\n{log}"
            if out["code"] == -signal.SIGTERM:
                # Killed by the signal's default action: only before its handlers were set,
                # which is before it could claim anything.
                assert "started (concurrency" not in log, log
            else:
                assert out["code"] == 0, f"worker {n} ({when} +{seconds} s) exited {out['code']}:\n{log}"
                assert "stopped" in log, log
            held = db.execute(
                "SELECT id FROM engine_instance WHERE lease_owner = %s AND lease_token <> ''",
                (f"sig-worker-{n}",),
            )
            assert held == [], f"worker {n} ({when} +{seconds} s) left leases held: {held}"
    drained = [n for n in range(len(MOMENTS)) if "draining" in (tmp_path / f"w{n}.log").read_text()]
    assert len(drained) >= len(MOMENTS) // 2  # most were stopped as started workers, by their handler
    assert db.execute("SELECT count(DISTINCT instance_id) FROM e2e_effects")[0][0] > 0  # they did claim
    finisher = start_worker(db, log=tmp_path / "finisher.log")
    try:
        wait_for(
            lambda: db.execute("SELECT count(*) FROM engine_instance WHERE status <> 'complete'") == [(0,)],
            timeout=120,
            what="every instance to complete",
        )
    finally:
        assert stop(finisher) == 0
    # Every drain let its steps finish: no step ran twice (a step cut off by a kill would have).
    assert db.execute("SELECT instance_id, step, count(*) FROM e2e_effects GROUP BY 1, 2 HAVING count(*) > 1") == []
    assert db.execute("SELECT count(*) FROM e2e_effects") == [(120 * 4,)]


def test_with_json_logs_the_start_drain_and_stop_lines_are_json_records_with_their_facts(db, tmp_path):
    log = tmp_path / "w.log"
    proc = start_worker(
        db,
        concurrency=3,
        lease=4.0,
        poll=0.5,
        log=log,
        env={"RUNLEDGER_LOG_FORMAT": "json"},
        args=("--id", "json-worker"),
    )
    wait_ready(proc)
    assert stop(proc) == 0
    records = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    mine = {r["phase"]: r for r in records if r.get("logger") == "runledger.engine.worker"}
    assert set(mine) == {"started", "draining", "stopped"}, log.read_text()
    start = mine["started"]
    assert start["event"] == "worker json-worker started (concurrency 3)"
    assert (
        start["level"],
        start["worker"],
        start["concurrency"],
        start["lease_seconds"],
        start["poll_seconds"],
        start["pid"],
    ) == ("INFO", "json-worker", 3, 4.0, 0.5, proc.pid)
    assert start["database"].endswith("postgresql")
    assert (mine["stopped"]["turns"], mine["stopped"]["drained"]) == (0, True)
    assert not [line for line in log.read_text().splitlines() if line.strip() and not line.startswith("{")]
