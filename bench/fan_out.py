"""Fan-out benchmark on PostgreSQL: prints its figures; not a test.

    .venv/bin/python bench/fan_out.py                   # 10,000 items, 100 x 100, 2 workers
    .venv/bin/python bench/fan_out.py --items 2000 --parents 20 --per-parent 50
    .venv/bin/python bench/fan_out.py --items 2000 --pack 0 --ratio-only   # per-instance items, (a) and (b)

Figures:
  (a) one `step.fan_out` of N no-op items (default 10,000) through 2 worker processes: wall
      time from the parent's create to its completion, and per item;
  (b) the same N items as plain `step.do` steps of one instance (run by one worker: an
      instance's steps are sequential), wall time and per item; the overhead of an item as its
      own durable unit is (a) per item minus (b) per item;
  (c) P concurrent fan-outs of M items each (default 100 x 100): wall time from the first
      create to the last parent's completion, items/s;
  (d) for scale, N one-step instances of the items' workflow created directly (create_batch,
      no parent): what an item costs as an instance alone, without a parent to count into.
With `--pack K` (default 50) the fan-outs pack K items per carrier instance, each item a step
of its carrier; `--pack 0` leaves the option out, so each item is an instance of its own
(claimed, leased, its step recorded, its result counted into the fan-out's aggregate row).
Either way (a) measures the engine's cost per item, not the no-op. The last line is
`fan-out item = N.Nx a plain step`: (a) per item over (b) per item.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import engine as base  # noqa: E402 - after the path is set

base.DB_NAME = os.environ.get("BENCH_DB", "runledger_bench_fan_out")
MODULES = "bench.workflows,bench.fan_out_workflows"


def setup() -> None:
    os.environ["RUNLEDGER_WORKFLOW_MODULES"] = MODULES
    base.setup_django()
    os.environ["RUNLEDGER_WORKFLOW_MODULES"] = MODULES  # setup_django set only bench.workflows
    import bench.fan_out_workflows  # noqa: F401 - registers the workflows in this process too


def reset() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE engine_instance, engine_step, engine_attempt, engine_history, "
            "engine_pendingevent, engine_deadletter, engine_fanout, engine_fanoutitem, api_costs CASCADE"
        )


def wait_for(ids: list[str], *, limit_s: float) -> None:
    from ingest.engine.models import Instance

    deadline = time.monotonic() + limit_s
    while Instance.objects.filter(id__in=ids).exclude(status__in=["complete", "errored"]).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{ids[:3]}... not finished after {limit_s:g} s")
        time.sleep(0.1)


def finished_in(ids: list[str], started: object) -> float:
    from django.db.models import Max

    from ingest.engine.models import Instance

    errored = Instance.objects.filter(id__in=ids, status="errored").count()
    if errored:
        raise RuntimeError(f"{errored} instances errored")
    ended = Instance.objects.filter(id__in=ids).aggregate(m=Max("ended_at"))["m"]
    return float((ended - started).total_seconds())  # type: ignore[operator]


def one_fan_out(items: int, concurrency: int, pack: int) -> dict[str, float]:
    from ingest.engine import create
    from ingest.engine.clock import now
    from ingest.engine.models import Instance

    reset()
    procs = base.workers(2, concurrency, ready=True)
    try:
        started = now()
        create("bench-fan-out", id="fan-1", params={"items": items, "pack": pack})
        wait_for(["fan-1"], limit_s=1800)
    finally:
        base.stop(procs)
    wall = finished_in(["fan-1"], started)
    assert Instance.objects.get(id="fan-1").output == {"ok": items}
    return {"items": items, "wall_s": wall, "per_item_ms": wall / items * 1000, "items_per_s": items / wall}


def plain_steps(items: int, concurrency: int) -> dict[str, float]:
    from ingest.engine import create
    from ingest.engine.clock import now

    reset()
    procs = base.workers(2, concurrency, ready=True)
    try:
        started = now()
        create("bench-plain-steps", id="plain-1", params={"items": items})
        wait_for(["plain-1"], limit_s=1800)
    finally:
        base.stop(procs)
    wall = finished_in(["plain-1"], started)
    return {"items": items, "wall_s": wall, "per_item_ms": wall / items * 1000}


def many_fan_outs(parents: int, per_parent: int, concurrency: int, pack: int) -> dict[str, float]:
    from ingest.engine import create_batch
    from ingest.engine.clock import now

    reset()
    ids = [f"fans-{i}" for i in range(parents)]
    procs = base.workers(2, concurrency, ready=True)
    try:
        started = now()
        for b in range(0, parents, 100):
            create_batch(
                "bench-fan-out", [{"id": i, "params": {"items": per_parent, "pack": pack}} for i in ids[b : b + 100]]
            )
        wait_for(ids, limit_s=1800)
    finally:
        base.stop(procs)
    wall = finished_in(ids, started)
    return {"parents": parents, "items_each": per_parent, "wall_s": wall, "items_per_s": parents * per_parent / wall}


def solo_instances(items: int, concurrency: int) -> dict[str, float]:
    from ingest.engine import create_batch
    from ingest.engine.clock import now

    reset()
    ids = [f"solo-{i}" for i in range(items)]
    procs = base.workers(2, concurrency, ready=True)
    try:
        started = now()
        for b in range(0, items, 100):
            create_batch(
                "fan-out.bench-noop", [{"id": i, "params": {"item": n}} for n, i in enumerate(ids[b : b + 100])]
            )
        wait_for(ids, limit_s=1800)
    finally:
        base.stop(procs)
    wall = finished_in(ids, started)
    return {"items": items, "wall_s": wall, "per_item_ms": wall / items * 1000, "items_per_s": items / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--parents", type=int, default=100)
    parser.add_argument("--per-parent", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=32, help="instances in flight per worker process")
    parser.add_argument("--pack", type=int, default=50, help="items per carrier instance; 0: an instance per item")
    parser.add_argument("--ratio-only", action="store_true", help="run only (a) and (b)")
    args = parser.parse_args()
    setup()
    fan = one_fan_out(args.items, args.concurrency, args.pack)
    print(f"one fan-out {json.dumps(fan)}", flush=True)
    plain = plain_steps(args.items, args.concurrency)
    print(f"plain steps {json.dumps(plain)}", flush=True)
    if not args.ratio_only:
        extra(args, fan, plain)
    print(f"fan-out items/s {fan['items_per_s']:.1f}, plain steps/s {args.items / plain['wall_s']:.1f}")
    print(f"fan-out item = {fan['per_item_ms'] / plain['per_item_ms']:.1f}x a plain step")


def extra(args: argparse.Namespace, fan: dict[str, float], plain: dict[str, float]) -> None:
    many = many_fan_outs(args.parents, args.per_parent, args.concurrency, args.pack)
    print(f"concurrent fan-outs {json.dumps(many)}", flush=True)
    solo = solo_instances(args.items, args.concurrency)
    print(f"one-step instances {json.dumps(solo)}", flush=True)
    print(
        "SUMMARY "
        + json.dumps(
            {
                "fan_out_wall_s": fan["wall_s"],
                "fan_out_per_item_ms": fan["per_item_ms"],
                "plain_steps_wall_s": plain["wall_s"],
                "plain_step_per_item_ms": plain["per_item_ms"],
                "overhead_per_item_ms": fan["per_item_ms"] - plain["per_item_ms"],
                "concurrent_wall_s": many["wall_s"],
                "concurrent_items_per_s": many["items_per_s"],
                "one_step_instance_per_item_ms": solo["per_item_ms"],
                "loadavg_1m": os.getloadavg()[0],
            },
            indent=2,
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
