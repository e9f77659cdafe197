"""Fault benchmark: how fast Runledger recovers from a PostgreSQL restart and from SIGKILLed
workers (issue 15, section 3). Prints its figures; not a test.

    .venv/bin/python bench/faults.py                    # everything, as below
    .venv/bin/python bench/faults.py --rounds 1 --kills 5 --kill-instances 200   # quick

Each run uses a throwaway database on the server of RUNLEDGER_TEST_POSTGRES_URL (or
BENCH_PG_SERVER), dropped at the end; the faults touch that database only:
  (a) restart, busy: 2 workers run `--instances` five-step instances; mid-run every session of
      the database ends and new ones are refused for `--down` seconds (what clients see of a
      restart). Figure: seconds from "database back" to "every instance the restart interrupted
      progressed" (its first history row after that instant; the queued ones behind them wait
      for a free slot either way), the worst instance of each round; p50 and max over
      `--rounds` rounds;
  (b) restart, idle: the workers are idle when their sessions end; 48 instances are created a
      second later. Figure: the slowest one's seconds from creation to completion;
  (c) kills: `--kills` SIGKILLs over `--kill-instances` five-step instances (steps of 0.3 s)
      with 2 worker processes, spread over the run (kill k once k/(kills+1) of it is done), a
      new worker started after each kill. Figures: seconds from a kill until another worker
      ended the victim's leases (its log line; liveness), until every instance it held ran again
      (a history row; bounded by free slots: the survivor's are busy until the new worker is
      up), the drain after the last kill, instances lost, completed steps re-run, steps run in
      two processes at once;
  (d) reservations: 5 kills over 100 instances whose steps hold money on a budget. Figure:
      reservations still held once drained.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.engine.faults import (  # noqa: E402 - the path above first
    FaultDatabase,
    completed_steps_rerun,
    held_reservations,
    in_flight,
    overlapping_runs,
    percentile,
    progress_lags,
    restart,
    terminate_sessions,
)
from tests.engine.procs import python, start_worker, start_workers, stop, wait_for  # noqa: E402

SERVER = os.environ.get("BENCH_PG_SERVER") or os.environ.get(
    "RUNLEDGER_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)
LOGS = Path(os.environ.get("BENCH_LOG_DIR", "/tmp/runledger-bench-faults"))


def create(db: FaultDatabase, workflow: str, prefix: str, count: int, **params: float) -> None:
    python(
        db,
        "from ingest.engine import create_batch\n"
        f"for b in range(0, {count}, 100):\n"
        f"    create_batch({workflow!r}, [{{'id': f'{prefix}-{{i}}', 'params': {params!r}}}\n"
        f"                               for i in range(b, min(b + 100, {count}))])",
        timeout=600,
    )


def count(db: FaultDatabase, prefix: str, status: str = "complete") -> int:
    return int(
        db.execute("SELECT count(*) FROM engine_instance WHERE id LIKE %s AND status = %s", (f"{prefix}-%", status))[0][
            0
        ]
    )


def restart_busy(db: FaultDatabase, *, rounds: int, instances: int, down: float) -> dict[str, object]:
    worst: list[float] = []
    workers = start_workers(db, 2, log_dir=LOGS, concurrency=8)
    try:
        for r in range(rounds):
            prefix = f"busy{r}"
            create(db, "e2e-five-steps", prefix, instances, hold=0.05)
            wait_for(lambda p=prefix: count(db, p) >= instances // 5, timeout=300, what="the run to be under way")
            # The instances the restart interrupts (their turns were running); those still queued
            # behind them wait for a free slot, restart or not.
            waiting = [i for i in in_flight(db, "e2e-five-steps") if i.startswith(prefix)]
            back = restart(db, down_seconds=down)
            wait_for(
                lambda p=prefix: count(db, p) == instances, timeout=600, interval=0.5, what="every instance to complete"
            )
            lags = progress_lags(db, ids=waiting, since=back)
            worst.append(max(lags))
            print(
                f"[restart {r + 1}] {len(lags)} instances interrupted; progressed after "
                f"p50 {percentile(lags, 0.5):.3f} s, max {max(lags):.3f} s",
                flush=True,
            )
    finally:
        for w in workers:
            stop(w)
    return {
        "restart_progress_p50_s": statistics.median(worst),
        "restart_progress_max_s": max(worst),
        "restart_rounds": rounds,
        "restart_instances_per_round": instances,
    }


def restart_idle(db: FaultDatabase) -> dict[str, object]:
    workers = start_workers(db, 2, log_dir=LOGS, concurrency=8)
    try:
        create(db, "e2e-five-steps", "warm", 64, hold=0.0)
        wait_for(lambda: count(db, "warm") == 64, timeout=120, what="the warm-up")
        terminate_sessions(db)
        time.sleep(1.0)
        create(db, "e2e-five-steps", "idle", 48, hold=0.0)
        wait_for(lambda: count(db, "idle") == 48, timeout=300, interval=0.2, what="the new instances")
    finally:
        for w in workers:
            stop(w)
    took = sorted(
        float(row[0])
        for row in db.execute(
            "SELECT extract(epoch FROM ended_at - created_at) FROM engine_instance WHERE id LIKE 'idle-%'"
        )
    )
    over = sum(1 for t in took if t > 2.0)
    print(f"[idle restart] 48 new instances: p50 {took[24]:.3f} s, max {took[-1]:.3f} s, {over} over 2 s", flush=True)
    return {"idle_restart_max_s": took[-1], "idle_restart_over_2s": over}


def kill_rounds(
    db: FaultDatabase, *, workflow: str, prefix: str, instances: int, kills: int, hold: float, interval: float
) -> dict[str, object]:
    create(db, workflow, prefix, instances, hold=hold)
    workers = start_workers(db, 2, log_dir=LOGS, concurrency=8)
    victims: list[tuple[list[str], float]] = []  # what each victim held, and when it died
    pids: dict[int, float] = {}  # victim pid -> when it died
    try:
        for k in range(kills):
            # Spread over the run: kill k once k/(kills+1) of the instances are done, so the last
            # kill comes near the end and the drain after it is the takeover, not the backlog.
            wait_for(
                lambda k=k: count(db, prefix) >= instances * (k + 1) // (kills + 1),
                timeout=600,
                interval=0.05,
                what=f"progress before kill {k + 1}",
            )
            time.sleep(random.uniform(0, interval))
            victim = workers.pop(random.randrange(len(workers)))
            held = [
                row[0]
                for row in db.execute(
                    "SELECT id FROM engine_instance WHERE lease_owner LIKE %s AND lease_expires_at > now()",
                    (f"%:{victim.pid}:%",),
                )
            ]
            victim.send_signal(signal.SIGKILL)
            victim.wait(timeout=10)
            victims.append((held, time.time()))
            pids[victim.pid] = victims[-1][1]
            workers.append(start_worker(db, concurrency=8, log=LOGS / f"{prefix}-k{k}.log", wait=False))
        last_kill = victims[-1][1]
        wait_for(lambda: count(db, prefix) == instances, timeout=600, interval=0.1, what="the drain")
    finally:
        for w in workers:
            stop(w)
    # The drain as the ledger saw it: the last instance's end, not when the loop above looked.
    done = float(
        db.execute("SELECT extract(epoch FROM max(ended_at)) FROM engine_instance WHERE id LIKE %s", (f"{prefix}-%",))[
            0
        ][0]
    )
    # Per kill: until every instance the victim held moved again (a history row), its slowest.
    pickups = [max(lags) for held, killed_at in victims if (lags := progress_lags(db, ids=held, since=killed_at))]
    released = _released_after(pids)
    print(
        f"[kills {prefix}] {kills} kills; a dead worker's leases ended after p50 {percentile(released, 0.5):.3f} s, "
        f"max {max(released, default=0):.3f} s; its instances ran again after p50 {percentile(pickups, 0.5):.3f} s, "
        f"max {max(pickups, default=0):.3f} s; drain {done - last_kill:.3f} s after the last kill",
        flush=True,
    )
    return {
        "kills": kills,
        "instances": instances,
        "released_p50_s": percentile(released, 0.5),
        "released_max_s": max(released, default=None),
        "pickup_p50_s": percentile(pickups, 0.5),
        "pickup_max_s": max(pickups, default=None),
        "drain_after_last_kill_s": done - last_kill,
        "lost": instances - count(db, prefix),
        "completed_steps_rerun": completed_steps_rerun(db),
        "runs_in_two_processes_at_once": overlapping_runs(db),
    }


def _released_after(pids: dict[int, float]) -> list[float]:
    """Seconds from each kill to the log line of the worker that ended the victim's leases
    (worker/liveness.py), read from every worker's log."""
    import re
    from datetime import UTC, datetime

    line = re.compile(r"^(\S+ \S+) WARNING runledger\.engine worker \S+: worker\(s\) (.+) lost their database session")
    first: dict[int, float] = {}
    for log in LOGS.glob("*.log"):
        for text in log.read_text(errors="replace").splitlines():
            m = line.match(text)
            if not m:
                continue
            at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC).timestamp()
            for owner in m.group(2).split(", "):
                pid = int(owner.split(":")[-2]) if owner.count(":") >= 2 else -1
                if pid in pids and at >= pids[pid]:
                    first[pid] = min(first.get(pid, at), at)
    return sorted(first[pid] - pids[pid] for pid in first)


def reservations_round(db: FaultDatabase) -> dict[str, object]:
    python(
        db,
        "from decimal import Decimal\n"
        "from ingest.engine.clock import now\n"
        "from ingest.engine.models import Budget\n"
        "from ingest.engine.periods import period_start\n"
        "Budget.objects.create(scope='service', key='e2e-llm', period='day', limit=Decimal('100000'),\n"
        "                      period_start=period_start('day', now()), updated_at=now())",
    )
    figures = kill_rounds(db, workflow="e2e-costed", prefix="costed", instances=100, kills=5, hold=0.3, interval=2.0)
    time.sleep(1.0)  # the last sweep (each heartbeat; right after a dead worker's leases end)
    return {"reservation_kills": figures["kills"], "reservations_held_after_drain": held_reservations(db)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--instances", type=int, default=500)
    parser.add_argument("--down", type=float, default=1.0, help="seconds the database refuses connections")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--kill-instances", type=int, default=1000)
    parser.add_argument(
        "--kill-interval",
        type=float,
        default=2.0,
        help="most seconds a kill waits, at random, once its share of the run is done",
    )
    parser.add_argument("--skip", action="append", default=[], choices=["restart", "idle", "kill", "reservations"])
    args = parser.parse_args()
    LOGS.mkdir(parents=True, exist_ok=True)
    random.seed(15)
    figures: dict[str, object] = {}
    with FaultDatabase(SERVER) as db:
        if "restart" not in args.skip:
            figures.update(restart_busy(db, rounds=args.rounds, instances=args.instances, down=args.down))
        if "idle" not in args.skip:
            figures.update(restart_idle(db))
        if "kill" not in args.skip:
            kill = kill_rounds(
                db,
                workflow="e2e-five-steps",
                prefix="kill",
                instances=args.kill_instances,
                kills=args.kills,
                hold=0.3,
                interval=args.kill_interval,
            )
            figures.update({f"kill_{k}": v for k, v in kill.items()})
        if "reservations" not in args.skip:
            figures.update(reservations_round(db))
    print("FIGURES " + json.dumps(figures, indent=2, default=str))


if __name__ == "__main__":
    main()
