"""What an instance's first `attributes_set` costs, on PostgreSQL: the `search-attributes` step
every shipped workflow runs first.

    .venv/bin/python bench/attributes_first_set.py [--url postgres://…] [--calls 2000] [--rounds 5]

Each round makes `--calls` new instances and sets two attributes on each (a call id and an
account, as `gong-ingest` does), one `attributes_set` at a time on this process's Django
connection, autocommit as in a step. Prints, per call: wall time, this process's CPU and its
PostgreSQL backend's CPU (from /proc, so run it on the database's machine), and the statements
sent; medians over the rounds. It makes its own database (runledger_bench_attrfirst) and empties
its instances per round. To compare two commits, run this same file with each commit's code:
`RUNLEDGER_BENCH_ROOT=/path/to/checkout python bench/attributes_first_set.py`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(os.environ.get("RUNLEDGER_BENCH_ROOT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT))
from bench.dashboard import ensure_database, setup_django  # noqa: E402
from bench.pipelines import cpu_seconds  # noqa: E402

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/runledger_bench_attrfirst"


def one_round(calls: int, round_no: int) -> tuple[float, float, float, float]:
    """(wall µs, process CPU µs, backend CPU µs, statements) per call."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from ingest.engine.models import Instance
    from ingest.engine.services.attributes import attributes_set

    Instance.objects.filter(id__startswith="af-").delete()
    now = timezone.now()
    ids = [f"af-{round_no}-{i}" for i in range(calls)]
    Instance.objects.bulk_create(
        [Instance(id=i, workflow="gong-ingest", tenant="acme", created_at=now, updated_at=now) for i in ids],
        batch_size=1000,
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with CaptureQueriesContext(connection) as captured:
        attributes_set(instance_id=ids[0], values={"call_id": "warm", "account": "warm"})
    statements = len(captured.captured_queries)
    b0, c0, t0 = _cpu(pid), time.process_time(), time.perf_counter()
    for n, instance_id in enumerate(ids[1:]):
        attributes_set(instance_id=instance_id, values={"call_id": f"call-{n}", "account": f"acct-{n % 50}"})
    wall, cpu, backend = time.perf_counter() - t0, time.process_time() - c0, _cpu(pid) - b0
    per = 1e6 / (calls - 1)
    return wall * per, cpu * per, backend * per, statements


def _cpu(pid: int) -> float:
    cpu = cpu_seconds(pid)
    if cpu is None:
        raise SystemExit(f"no /proc/{pid}: run this on the database's machine")
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("BENCH_ATTRFIRST_URL") or DEFAULT_URL)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ensure_database(args.url)
    setup_django(args.url)
    rounds = [one_round(args.calls, r) for r in range(args.rounds)]
    wall, cpu, backend, statements = (statistics.median(x) for x in zip(*rounds, strict=True))
    print(
        f"attributes_set, an instance's first (2 attributes), {args.calls:,} calls × {args.rounds} rounds, "
        f"code at {ROOT} (load {os.getloadavg()[0]:.2f}):"
    )
    print(
        f"  per call, medians: wall {wall:.0f} µs, this process's CPU {cpu:.0f} µs, PostgreSQL backend's "
        f"CPU {backend:.0f} µs, {statements:.0f} statements"
    )
    print(
        "  rounds (wall / process / backend µs): " + "; ".join(f"{w:.0f} / {c:.0f} / {b:.0f}" for w, c, b, _ in rounds)
    )


if __name__ == "__main__":
    main()
