"""Engine benchmark: Runledger against DBOS Transact on PostgreSQL. Prints its figures; not a test.

    .venv/bin/pip install -e '.[bench]'        # DBOS, for the comparison
    .venv/bin/python bench/engine.py            # everything, 3 interleaved repeats, medians
    .venv/bin/python bench/engine.py --skip-dbos --sleepers 20000 --repeats 1

Figures (each repeated, Runledger and DBOS interleaved, medians printed):
  (a) a 10-step no-op workflow run sequentially: engine overhead per step, p50 and p99, timed
      around each `step.do` call inside the workflow (the step itself does nothing);
  (b) 2,000 instances x 10 no-op steps through 2 worker processes: steps/s, measured as the
      DBOS side is: the workers are started and ready, then the instances are created
      (create_batch, 100 per call); wall time from just before the first create to the last
      instance's end;
  (c) the same two with DBOS (bench/dbos_side.py: a queue polled every 0.05 s with
      worker_concurrency 10, and its sequential mode), and the ratios;
  (d) N sleeping instances (default 100,000): worker RSS and wake-up lag p99 (a sleep step's
      end minus its due time).
Both engines run on PostgreSQL's default durability (synchronous_commit and fsync on).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVER = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
# Dropped and created anew by each run: BENCH_DB names another when several run on one server.
DB_NAME = os.environ.get("BENCH_DB", "runledger_bench_engine")
# The DBOS side's database (bench/dbos_side.py drops it at the end): BENCH_DBOS_DB names another.
DBOS_DB_NAME = os.environ.get("BENCH_DBOS_DB", "runledger_bench_dbos")


def setup_django(db_name: str = DB_NAME) -> None:
    os.environ["DATABASE_URL"] = f"{SERVER}/{db_name}"
    os.environ["RUNLEDGER_WORKFLOW_MODULES"] = "bench.workflows"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    sys.path.insert(0, str(ROOT))
    import psycopg

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db_name}"')
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True, env=os.environ.copy())
    import django

    django.setup()


def reset() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE engine_instance, engine_step, engine_attempt, engine_history, "
            "engine_pendingevent, engine_deadletter CASCADE"
        )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def runledger_sequential(workflows: int) -> dict[str, float]:
    """One instance at a time, run to completion in this process; per-step time around step.do."""
    from bench.workflows import STEP_TIMES
    from ingest.engine import create
    from ingest.engine.worker.turns import run_until_idle

    reset()
    STEP_TIMES.clear()
    for i in range(workflows):
        create("bench-timed-noops", id=f"seq-{i}")
        run_until_idle()
    samples = STEP_TIMES[10 * 10 :]  # the first 10 workflows warm up connections and caches
    return {
        "p50_ms": percentile(samples, 0.5) * 1000,
        "p99_ms": percentile(samples, 0.99) * 1000,
        "samples": len(samples),
    }


def workers(count: int, concurrency: int, *, ready: bool = False) -> list[subprocess.Popen[bytes]]:
    """Start `count` worker processes; with `ready`, return once each says it has started."""
    env = os.environ.copy()
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", "worker", "--concurrency", str(concurrency), "--poll", "0.5"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]
    if ready:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            if b"started" not in line:
                raise RuntimeError(f"worker did not start: {line!r}")
    return procs


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        p.communicate(timeout=120)


def count_unfinished(workflow: str) -> int:
    from ingest.engine.models import Instance

    return Instance.objects.filter(workflow=workflow).exclude(status__in=["complete", "errored"]).count()


def runledger_throughput(instances: int, processes: int, concurrency: int) -> dict[str, float]:
    """As bench/dbos_side.py measures DBOS: the workers are started and ready first; the wall time
    runs from just before the first create (create_batch, 100 per call) to the last instance's end."""
    from django.db.models import Max

    from ingest.engine import create_batch
    from ingest.engine.clock import now
    from ingest.engine.models import Instance

    reset()
    procs = workers(processes, concurrency, ready=True)
    try:
        started = now()
        for b in range(instances // 100):
            create_batch("bench-ten-noops", [{"id": f"tp-{b}-{i}"} for i in range(100)])
        created = (now() - started).total_seconds()
        while count_unfinished("bench-ten-noops"):
            time.sleep(0.2)
    finally:
        stop(procs)
    ended = Instance.objects.filter(workflow="bench-ten-noops").aggregate(m=Max("ended_at"))["m"]
    wall = (ended - started).total_seconds()
    errored = Instance.objects.filter(workflow="bench-ten-noops", status="errored").count()
    return {
        "steps_per_s": instances * 10 / wall,
        "wall_s": wall,
        "create_s": created,
        "errored": errored,
        "loadavg_1m": os.getloadavg()[0],
    }


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return 0.0


def runledger_sleepers(count: int, processes: int, lead_s: float, rate: float) -> dict[str, float]:
    """Create `count` instances that sleep until `lead_s` after their creation, at `rate` per second."""
    from ingest.engine import create_batch
    from ingest.engine.clock import now

    reset()
    procs = workers(processes, 16)
    peak = 0.0
    try:
        t0 = time.monotonic()
        for b in range(count // 100):
            due = now().timestamp() + lead_s
            from datetime import UTC, datetime

            until = datetime.fromtimestamp(due, tz=UTC).isoformat()
            create_batch("bench-sleeper", [{"id": f"zz-{b}-{i}", "params": {"until": until}} for i in range(100)])
            ahead = (b + 1) * 100 / rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
            if b % 50 == 0:
                peak = max(peak, *(rss_mb(p.pid) for p in procs))
        while count_unfinished("bench-sleeper"):
            peak = max(peak, *(rss_mb(p.pid) for p in procs))
            time.sleep(0.5)
    finally:
        stop(procs)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM ended_at - wake_at) FROM engine_step WHERE name = 'nap'")
        lags = [float(r[0]) for r in cursor.fetchall()]
    return {
        "sleepers": count,
        "worker_rss_peak_mb": peak,
        "wake_lag_p50_s": percentile(lags, 0.5),
        "wake_lag_p99_s": percentile(lags, 0.99),
        "wake_lag_max_s": max(lags),
    }


def dbos(mode: str, *args: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "dbos_side.py"), mode, *args, "--database", DBOS_DB_NAME],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if out.returncode != 0:
        raise RuntimeError(f"dbos_side.py {mode} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def median_of(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sequential-workflows", type=int, default=210)
    parser.add_argument("--instances", type=int, default=2000)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=32,
        help="instances in flight per worker process (default 32: larger group commits)",
    )
    parser.add_argument("--sleepers", type=int, default=100_000)
    parser.add_argument(
        "--sleeper-rate",
        type=float,
        default=300.0,
        help="sleepers created per second: their due times spread at this rate",
    )
    parser.add_argument("--sleeper-repeats", type=int, default=1)
    parser.add_argument("--skip-dbos", action="store_true")
    parser.add_argument(
        "--drop-index",
        default="",
        help="indexes to drop after migrating, comma-separated: what an index costs the "
        "write path (e.g. instance_unfinished,deadletter_open,history_parked)",
    )
    args = parser.parse_args()
    setup_django()
    if args.drop_index:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX " + ", ".join(n.strip() for n in args.drop_index.split(",")))
        print(f"dropped indexes: {args.drop_index}", flush=True)
    seq, tp, dseq, dtp = [], [], [], []
    for r in range(args.repeats):
        seq.append(runledger_sequential(args.sequential_workflows))
        print(f"[{r + 1}] runledger sequential {json.dumps(seq[-1])}", flush=True)
        if not args.skip_dbos:
            dseq.append(dbos("sequential", "--workflows", str(args.sequential_workflows)))
            print(f"[{r + 1}] dbos sequential {json.dumps(dseq[-1])}", flush=True)
        tp.append(runledger_throughput(args.instances, 2, args.concurrency))
        print(f"[{r + 1}] runledger throughput {json.dumps(tp[-1])}", flush=True)
        if not args.skip_dbos:
            dtp.append(
                dbos(
                    "queue",
                    "--workflows",
                    str(args.instances),
                    "--steps",
                    "10",
                    "--processes",
                    "2",
                    "--concurrency",
                    "10",
                )
            )
            print(f"[{r + 1}] dbos queue {json.dumps(dtp[-1])}", flush=True)
    sleepers = []
    for r in range(args.sleeper_repeats if args.sleepers else 0):
        sleepers.append(runledger_sleepers(args.sleepers, 2, lead_s=30.0, rate=args.sleeper_rate))
        print(f"[{r + 1}] runledger sleepers {json.dumps(sleepers[-1])}", flush=True)
    summary: dict[str, object] = {}
    if seq:
        summary.update(
            {
                "runledger_step_overhead_p50_ms": median_of(seq, "p50_ms"),
                "runledger_step_overhead_p99_ms": median_of(seq, "p99_ms"),
                "runledger_steps_per_s": median_of(tp, "steps_per_s"),
            }
        )
    if dseq:
        summary.update(
            {
                "dbos_step_overhead_p50_ms": median_of(dseq, "step_p50_ms"),
                "dbos_step_overhead_p99_ms": median_of(dseq, "step_p99_ms"),
                "dbos_steps_per_s": median_of(dtp, "steps_per_s"),
            }
        )
        summary["throughput_ratio_vs_dbos"] = summary["runledger_steps_per_s"] / summary["dbos_steps_per_s"]  # type: ignore[operator]
    if sleepers:
        summary.update(
            {
                "sleepers": args.sleepers,
                "worker_rss_peak_mb": median_of(sleepers, "worker_rss_peak_mb"),
                "wake_lag_p99_s": median_of(sleepers, "wake_lag_p99_s"),
            }
        )
    print("MEDIANS " + json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
