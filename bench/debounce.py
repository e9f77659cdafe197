"""Debounce and batching benchmark on PostgreSQL: prints its figures; not a test.

    .venv/bin/python bench/debounce.py                  # 10,000 events, 100 keys, 8 publishers
    .venv/bin/python bench/debounce.py --events 2000 --keys 20

Figures, each from 8 threads publishing at once (as 8 web processes would) while a worker runs:
  (a) plain: a subscription without coalescing; every event starts an instance (the baseline);
  (b) debounce by key (period 30 s, longer than any gap between two events of a key here): N
      events over K keys must start exactly K instances, each with the last event of its key,
      and the counts in their `_debounce` must sum to N;
  (c) batch (max_size 100, timeout 2 s, no key): N events must start N/100 instances holding
      every event exactly once.
The threads take the next event number from one counter, so the events of a key arrive evenly
spaced (as a busy source sends them). For each: events/s accepted, publish latency p50/p99,
instances started, duplicates (an event counted in two instances; for debounce also a key
started twice) and lost events (in no instance).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import engine as base  # noqa: E402 - after the path is set

base.DB_NAME = os.environ.get("BENCH_DB", "runledger_bench_debounce")
THREADS = 8


def reset() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE engine_instance, engine_step, engine_attempt, engine_history, engine_pendingevent, "
            "triggers_subscription, triggers_publishedevent, triggers_coalescewindow CASCADE"
        )


def publish_all(events: int, keys: int, kind: str) -> tuple[float, list[float]]:
    """Publish `events` events from THREADS threads; (wall seconds, per-publish latencies)."""
    from django.db import close_old_connections
    from django.utils import timezone

    from ingest.triggers.services import event_publish

    latencies: list[float] = []
    lock = threading.Lock()
    errors: list[BaseException] = []
    numbers = iter(range(events))

    def take() -> int | None:
        with lock:
            return next(numbers, None)

    def send(worker: int) -> None:
        mine = []
        try:
            while (n := take()) is not None:
                t = time.perf_counter()
                event_publish(
                    type=f"bench.{kind}",
                    data={"account": f"acct-{n % keys}", "n": n},
                    id=f"{kind}-{n}",
                    tenant="bench",
                    now=timezone.now(),
                )
                mine.append(time.perf_counter() - t)
        except BaseException as exc:  # noqa: BLE001 - reported after the join
            errors.append(exc)
        finally:
            close_old_connections()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=send, args=(w,)) for w in range(THREADS)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - start, latencies


def wait_done(workflow: str, expected: int | None, limit_s: float = 600) -> int:
    from ingest.engine.models import Instance

    deadline = time.monotonic() + limit_s
    while True:
        qs = Instance.objects.filter(workflow=workflow)
        total = qs.count()
        open_ = qs.exclude(status="complete").count()
        if open_ == 0 and (expected is None or total >= expected):
            return total
        if time.monotonic() > deadline:
            raise RuntimeError(f"{open_} of {total} {workflow} instances unfinished after {limit_s:g} s")
        time.sleep(0.2)


def run(kind: str, events: int, keys: int) -> dict[str, float]:
    from ingest.engine.models import Instance
    from ingest.triggers.services import subscription_create

    reset()
    coalesce = {
        "plain": {},
        "debounce": {"debounce": {"key": "account", "period": "30 seconds"}},
        "batch": {"batch": {"max_size": 100, "timeout": "2 seconds"}},
    }[kind]
    subscription_create(workflow="bench-noop", pattern=f"bench.{kind}", coalesce=coalesce)
    wall, lat = publish_all(events, keys, kind)
    # A batch also starts at its timeout, so N/100 is the fewest batches, not the only count.
    expected = {"plain": events, "debounce": keys, "batch": -(-events // 100)}[kind]
    total = wait_done("bench-noop", expected)
    instances = list(Instance.objects.filter(workflow="bench-noop").only("params"))
    dup = lost = 0
    if kind == "debounce":
        per_key = Counter(i.params["account"] for i in instances)
        counted = sum(i.params["_debounce"]["count"] for i in instances)
        dup = sum(c - 1 for c in per_key.values()) + max(0, counted - events)
        lost = max(0, events - counted)
    elif kind == "batch":
        seen = Counter(e["n"] for i in instances for e in i.params["events"])
        dup = sum(c - 1 for c in seen.values())
        lost = events - len(seen)
    else:
        seen = Counter(i.params["n"] for i in instances)
        dup = sum(c - 1 for c in seen.values())
        lost = events - len(seen)
    lat.sort()
    return {
        "events_per_s": events / wall,
        "p50_ms": 1000 * base.percentile(lat, 0.5),
        "p99_ms": 1000 * base.percentile(lat, 0.99),
        "instances": total,
        "expected": expected,
        "duplicates": dup,
        "lost": lost,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=100)
    args = parser.parse_args()
    os.environ["RUNLEDGER_WORKFLOW_MODULES"] = "bench.workflows"
    base.setup_django()
    from ingest.engine.worker.loop import Worker

    worker = Worker(concurrency=8, poll_seconds=0.2).start()
    try:
        print(
            f"debounce bench: {args.events:,} events, {args.keys} keys, {THREADS} publishing threads, "
            f"1 worker x 8 (load {os.getloadavg()[0]:.1f})"
        )
        for kind in ("plain", "debounce", "batch"):
            r = run(kind, args.events, args.keys)
            print(
                f"  {kind:9} {r['events_per_s']:8.0f} events/s  publish p50 {r['p50_ms']:6.1f} ms "
                f"p99 {r['p99_ms']:6.1f} ms  instances {r['instances']:,} "
                f"({'at least ' if kind == 'batch' else 'expected '}{r['expected']:,})  "
                f"duplicates {r['duplicates']}  lost {r['lost']}"
            )
    finally:
        worker.stop(timeout=30)


if __name__ == "__main__":
    main()
