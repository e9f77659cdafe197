"""Engine CPU per instance, in-process: 22-step instances shaped like gong-ingest (4 immediate
no-op steps, then 18 deferred ones), run one at a time on PostgreSQL by `run_until_idle`.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/NAME .venv/bin/python bench/engine_cpu.py --instances 300 --runs 3

Run it from the checkout to measure: that checkout's `ingest` is imported (the current directory
goes first on sys.path). Creates and migrates the database if needed; each run deletes its
instances, creates `--instances` new ones (not measured), then runs them all and prints, per
instance, this process's CPU (time.process_time: every thread, the committer's too) and the CPU
of this database's PostgreSQL backends (/proc), with the load average; and the medians of the runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.getcwd())
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__))))

from pipelines import cpu_seconds, ensure_database  # noqa: E402  (bench/pipelines.py)

WORKFLOW = "bench-engine-cpu"


def backends() -> dict[int, float]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        pids = [pid for (pid,) in cursor.fetchall()]
    return {pid: cpu for pid in pids if (cpu := cpu_seconds(pid)) is not None}


def one_run(n: int) -> tuple[float, float]:
    from ingest.engine import create
    from ingest.engine.models import History, Instance, Status
    from ingest.engine.worker.turns import run_until_idle

    History.objects.filter(workflow=WORKFLOW).delete()
    Instance.objects.filter(workflow=WORKFLOW).delete()
    for i in range(n):
        create(WORKFLOW, params={"i": i})
    before_pg = backends()
    cpu = time.process_time()
    turns = run_until_idle(max_turns=10 * n)
    cpu = time.process_time() - cpu
    after_pg = backends()
    pg = sum(c - before_pg.get(pid, 0.0) for pid, c in after_pg.items())
    done = Instance.objects.filter(workflow=WORKFLOW, status=Status.COMPLETE).count()
    assert done == n, f"{done} of {n} complete after {turns} turns"
    return cpu / n * 1000, pg / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        sys.exit("DATABASE_URL must name a PostgreSQL database")
    ensure_database(url)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import ingest
    from ingest.engine import Workflow

    class GongShaped(Workflow):
        name = WORKFLOW

        def run(self, event: Any, step: Any) -> Any:
            for i in range(4):
                step.do(f"prep-{i}", lambda ctx: None)
            for i in range(18):
                step.do(f"fact-{i}", lambda ctx: None, checkpoint="deferred")
            return "done"

    print(f"ingest from {os.path.dirname(ingest.__file__)}")
    results = []
    for run in range(1, args.runs + 1):
        py, pg = one_run(args.instances)
        load = os.getloadavg()[0]
        results.append((py, pg))
        print(
            f"run {run}: {args.instances} instances, per instance Python {py:.2f} ms, "
            f"PostgreSQL {pg:.2f} ms, total {py + pg:.2f} ms (load {load:.1f})",
            flush=True,
        )
    print(
        f"medians: Python {statistics.median(r[0] for r in results):.2f} ms, "
        f"PostgreSQL {statistics.median(r[1] for r in results):.2f} ms, "
        f"total {statistics.median(r[0] + r[1] for r in results):.2f} ms (load {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
