"""What the attribute value rows (engine 0020) cost the write path, on PostgreSQL.

    .venv/bin/python bench/attribute_writes.py [--url postgres://…] [--rows 2000] [--rounds 5]

An instance with search attributes changes status a few times per run (queued, running,
waiting, complete); each change is followed by its attribute row (0019) and, since 0020, by its
value rows (one per key, two here). This times one-row `UPDATE engine_instance SET status`
statements, each its own transaction as the engine's are, over instances with two attributes:
with the value rows' triggers enabled and disabled, alternating rounds, and prints the medians
per statement and their difference. Instances without attributes pay neither: the follow
trigger finds no attribute row and stops there.

It makes its own database (runledger_bench_attrw) and drops nothing: run it again to reuse it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.dashboard import ensure_database, setup_django  # noqa: E402

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/runledger_bench_attrw"
TRIGGER = "engine_instance_attribute_values_update"


def setup(url: str, rows: int) -> None:
    import psycopg
    from django.utils import timezone

    from ingest.engine.models import Instance

    if Instance.objects.filter(id__startswith="aw-").count() >= rows:
        return
    now = timezone.now()
    Instance.objects.filter(id__startswith="aw-").delete()
    Instance.objects.bulk_create(
        [
            Instance(id=f"aw-{i}", workflow="gong-ingest", tenant="acme", created_at=now, updated_at=now)
            for i in range(1, rows + 1)
        ],
        batch_size=1000,
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"""
            INSERT INTO engine_instance_attributes (instance_id, attributes)
            SELECT 'aw-' || i, jsonb_build_object('customer', 'c' || (i % 50), 'call_id', 'call-' || i)
            FROM generate_series(1, {rows}) i""")  # noqa: S608 - a number
        conn.execute("VACUUM ANALYZE engine_instance")


def one_round(url: str, rows: int, status: str) -> float:
    """Median µs per one-row status update over `rows` instances."""
    import psycopg

    took = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")  # the fsync is not what this compares
        for i in range(1, rows + 1):
            t0 = time.perf_counter()
            conn.execute(
                "UPDATE engine_instance SET status = %s, updated_at = now() WHERE id = %s", [status, f"aw-{i}"]
            )
            took.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("BENCH_ATTRW_URL") or DEFAULT_URL)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ensure_database(args.url)
    setup_django(args.url)
    setup(args.url, args.rows)
    import psycopg

    with_values: list[float] = []
    without: list[float] = []
    statuses = ["running", "waiting", "complete", "queued"]
    for r in range(args.rounds):
        for enabled in (True, False) if r % 2 == 0 else (False, True):
            with psycopg.connect(args.url, autocommit=True) as conn:
                conn.execute(
                    f"ALTER TABLE engine_instance_attributes {'ENABLE' if enabled else 'DISABLE'} TRIGGER {TRIGGER}"
                )
            us = one_round(args.url, args.rows, statuses[(r * 2 + int(enabled)) % len(statuses)])
            (with_values if enabled else without).append(us)
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE engine_instance_attributes ENABLE TRIGGER {TRIGGER}")
    a, b = statistics.median(with_values), statistics.median(without)
    print(
        f"one-row status update of an instance with 2 attributes, median of {args.rounds} rounds of "
        f"{args.rows:,} (load {os.getloadavg()[0]:.2f}):"
    )
    print(f"  value rows followed: {a:7.1f} µs   not followed: {b:7.1f} µs   cost {a - b:+.1f} µs per update")
    print(
        f"  rounds with: {', '.join(f'{x:.0f}' for x in with_values)}; "
        f"without: {', '.join(f'{x:.0f}' for x in without)}"
    )


if __name__ == "__main__":
    main()
