"""Versions benchmark: what a version check costs per replayed step. Prints its figures; not a test.

    .venv/bin/python bench/versions.py                 # 3 interleaved repeats, medians
    BENCH_DB=my_bench .venv/bin/python bench/versions.py --instances 100

A replayed step is a `step.do` whose result is in the ledger: the turn after a sleep replays
every step before it. Two workflows of 20 steps and a sleep, run in this process on PostgreSQL,
their instances created alternately in the same run:
  plain     each step a plain `step.do`: replay as before versions (a replay that matches its
            history pays nothing for versions: the versions are only read on a mismatch);
  guarded   each step behind `if step.version_at_least(1):`, the most a workflow can pay: one
            version check per replayed step.
Timed around each replayed call (the check and the memoised `step.do`), p50 and p99 of every
sample after the first repeat's warm-up, and the difference: the version check's overhead.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.engine import percentile, reset, setup_django  # noqa: E402 - after the path is set

STEPS = 20
TIMES: dict[str, list[float]] = {"plain": [], "guarded": []}
RECORD = {"on": False}


def register() -> None:
    from ingest.engine import Workflow

    def noop() -> int:
        return 1

    class Plain(Workflow):
        name = "bench-replay-plain"

        def run(self, event, step):
            for i in range(STEPS):
                t = time.perf_counter()
                step.do(f"noop-{i}", noop)
                if RECORD["on"]:
                    TIMES["plain"].append(time.perf_counter() - t)
            step.sleep("nap", "1 hour")

    class Guarded(Workflow):
        name = "bench-replay-guarded"
        version = 1

        def run(self, event, step):
            for i in range(STEPS):
                t = time.perf_counter()
                if step.version_at_least(1):
                    step.do(f"noop-{i}", noop)
                if RECORD["on"]:
                    TIMES["guarded"].append(time.perf_counter() - t)
            step.sleep("nap", "1 hour")


def one_repeat(instances: int) -> dict[str, float]:
    from ingest.engine import create
    from ingest.engine.worker.turns import run_until_idle

    reset()
    for i in range(instances):  # alternately, so both kinds meet the same database state
        create("bench-replay-plain", id=f"plain-{i}")
        create("bench-replay-guarded", id=f"guarded-{i}")
    run_until_idle()  # first turns: every step runs, then each instance sleeps
    RECORD["on"] = True
    try:
        run_until_idle(advance_clock=True)  # the wake-up turns replay the 20 stored steps
    finally:
        RECORD["on"] = False
    return {"plain": len(TIMES["plain"]), "guarded": len(TIMES["guarded"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--instances", type=int, default=200, help="instances of each workflow per repeat")
    args = parser.parse_args()
    setup_django(os.environ.get("BENCH_DB", "runledger_bench_versions"))
    register()
    rows = []
    for r in range(args.repeats + 1):  # repeat 0 warms connections, caches and prepared statements
        for samples in TIMES.values():
            samples.clear()
        one_repeat(args.instances)
        if r == 0:
            continue
        row = {
            f"{kind}_{q}_us": percentile(TIMES[kind], p) * 1e6
            for kind in ("plain", "guarded")
            for q, p in (("p50", 0.5), ("p99", 0.99))
        }
        row["samples_each"] = float(min(len(v) for v in TIMES.values()))
        row["loadavg_1m"] = os.getloadavg()[0]
        rows.append(row)
        print(f"[{r}] {json.dumps({k: round(v, 2) for k, v in row.items()})}", flush=True)
    medians = {k: statistics.median(row[k] for row in rows) for k in rows[0]}
    medians["check_overhead_p50_us"] = medians["guarded_p50_us"] - medians["plain_p50_us"]
    medians["check_overhead_p99_us"] = medians["guarded_p99_us"] - medians["plain_p99_us"]
    print("MEDIANS " + json.dumps({k: round(v, 2) for k, v in medians.items()}, indent=2))


if __name__ == "__main__":
    main()
