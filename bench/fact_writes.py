"""What `gong-ingest`'s fact writes cost, on PostgreSQL: the `persist-facts-{i}` steps' bodies alone.

    .venv/bin/python bench/fact_writes.py [--url postgres://…] [--calls 300] [--rounds 3]

Each round writes the facts of `--calls` demo calls (the corpus `bench/pipelines.py` sends,
extracted by the rule extractor its fake LLM answers with, one call's facts deduplicated as the
workflow does) through `persist_fact`, one at a time on this process's Django connection,
autocommit as in a step, in the calls' order: a pipeline run's new keys, supersedes and
multi-valued facts (a run with calls in flight at once also writes some calls out of order, which
stores a few facts outranked; here, in order, none is). Prints, per fact write: this process's CPU and its
PostgreSQL backend's (from /proc, so run it on the database's machine), the wall time and the
writes' outcomes; medians over the rounds. Its own database (runledger_bench_facts); every round
starts from an empty tenant. `--function-set plan_cache_mode=force_generic_plan` (or `--function-set
enable_seqscan=on`, …) runs the rounds with `ingest_fact_put` altered so in this database, and puts
its settings back afterwards. To compare two commits, run this file with each commit's code:
`RUNLEDGER_BENCH_ROOT=/path/to/checkout python bench/fact_writes.py`.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(os.environ.get("RUNLEDGER_BENCH_ROOT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT))
from bench.dashboard import ensure_database, setup_django  # noqa: E402
from bench.pipelines import cpu_seconds  # noqa: E402

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/runledger_bench_facts"
TENANT = "bench-facts"


def fact_writes(calls: int) -> list[dict[str, Any]]:
    """The keyword arguments of every `persist_fact` a pipeline run of `calls` calls makes."""
    from ingest.demo.corpus import demo_calls
    from ingest.extraction import facts_from_result
    from ingest.extraction.rules import RuleExtractor
    from ingest.pipelines.models import SourceAuthority
    from ingest.workflows.common import FactItem, unique_facts
    from ingest.workflows.gong import gong_instance_id

    extractor = RuleExtractor()
    writes = []
    for n, call in enumerate(demo_calls(seed=11, count=calls)):
        call_id = f"1{n:06d}"
        facts = facts_from_result(extractor.extract(call.transcript_text(), subject=call.account))
        items = unique_facts([FactItem(**fact.as_dict(), authority=SourceAuthority.GONG_CALL) for fact in facts])
        writes += [
            {
                "tenant": TENANT,
                "item": item,
                "ordinal": i,
                "source_ref": f"gong:call:{call_id}",
                "observed_at": call.started.isoformat(),
                "instance_id": gong_instance_id(TENANT, call_id),
            }
            for i, item in enumerate(items)
        ]
    return writes


def one_round(writes: list[dict[str, Any]]) -> tuple[float, float, float, collections.Counter[str]]:
    """(wall µs, process CPU µs, backend CPU µs) per write, and the writes' actions."""
    from django.db import connection

    from ingest.pipelines.models import Fact, FactHead
    from ingest.workflows.common import persist_fact

    Fact.objects.filter(tenant=TENANT).update(superseded_by=None)
    Fact.objects.filter(tenant=TENANT).delete()
    FactHead.objects.filter(tenant=TENANT).delete()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE ingest_fact, ingest_facthead")
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    actions: collections.Counter[str] = collections.Counter()
    b0, c0, t0 = _cpu(pid), time.process_time(), time.perf_counter()
    for write in writes:
        actions[persist_fact(**write)["action"]] += 1
    wall, cpu, backend = time.perf_counter() - t0, time.process_time() - c0, _cpu(pid) - b0
    per = 1e6 / len(writes)
    return wall * per, cpu * per, backend * per, actions


def _cpu(pid: int) -> float:
    cpu = cpu_seconds(pid)
    if cpu is None:
        raise SystemExit(f"no /proc/{pid}: run this on the database's machine")
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("BENCH_FACTS_URL") or DEFAULT_URL)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--function-set",
        metavar="NAME=VALUE",
        default="",
        help="run with `ALTER FUNCTION ingest_fact_put SET NAME = VALUE` in the bench's database",
    )
    args = parser.parse_args()
    if not args.url.startswith("postgres"):
        parser.error("the fact writes' PostgreSQL path is measured: --url postgres://…")
    setting = args.function_set.partition("=")
    if args.function_set and not (setting[0].replace("_", "").isalnum() and setting[2].replace("_", "").isalnum()):
        parser.error(f"--function-set takes NAME=VALUE, letters, digits and underscores; got {args.function_set!r}")
    ensure_database(args.url)
    setup_django(args.url)
    writes = fact_writes(args.calls)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT proconfig FROM pg_proc WHERE proname = 'ingest_fact_put'")
        saved = cursor.fetchone()[0] or []
        if args.function_set:
            cursor.execute(f"ALTER FUNCTION ingest_fact_put SET {setting[0]} = {setting[2]}")
    try:
        rounds = [one_round(writes) for _ in range(args.rounds)]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER FUNCTION ingest_fact_put RESET ALL")
            for item in saved:  # what the migrations set (enable_seqscan=off)
                name, _, value = item.partition("=")
                cursor.execute(f"ALTER FUNCTION ingest_fact_put SET {name} = {value}")
    wall, cpu, backend = (statistics.median(r[i] for r in rounds) for i in range(3))
    actions = ", ".join(f"{name} {count:,}" for name, count in sorted(rounds[-1][3].items()))
    altered = f", ingest_fact_put SET {args.function_set}" if args.function_set else ""
    print(
        f"persist_fact, {len(writes):,} writes from {args.calls:,} calls × {args.rounds} rounds, code at {ROOT}"
        f"{altered} (load {os.getloadavg()[0]:.2f}):"
    )
    print(
        f"  per write, medians: wall {wall:.0f} µs, this process's CPU {cpu:.0f} µs, PostgreSQL backend's "
        f"CPU {backend:.0f} µs; outcomes: {actions}"
    )
    print(
        "  rounds (wall / process / backend µs): " + "; ".join(f"{w:.0f} / {c:.0f} / {b:.0f}" for w, c, b, _ in rounds)
    )


if __name__ == "__main__":
    main()
