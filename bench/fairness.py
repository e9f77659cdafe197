"""Fairness benchmark: tenant A backfills Gong calls while tenant B's webhooks arrive at 2/s, on
PostgreSQL with real worker processes. Prints its figures; not a test.

    .venv/bin/python bench/fairness.py --reference               # 5,000 calls, 2 workers x 8 slots
    .venv/bin/python bench/fairness.py --calls 400 --concurrency 4   # a quick run
    .venv/bin/python bench/fairness.py --limit-a 4               # A under an operator's limit of 4

What it does: creates and migrates its own database (`runledger_bench_fairness` on the local
PostgreSQL, or DATABASE_URL), starts the fake Gong (tests/fakes, holding A's calls) and the fake
OpenAI-compatible API (answers in `--delay` s), and `--workers` `manage.py worker` processes that
extract through the fake. Then, at once:
  - tenant A's backfill: `manage.py ingest_pull gong --tenant A` against the fake Gong (the real
    command: calls listed in pages, transcripts fetched in batches, every instance started at
    BACKFILL_PRIORITY); the bench's Gong rate limit is raised (RUNLEDGER_RATE_LIMITS, this process
    only) so A's backlog builds in seconds, as a long backfill's does;
  - tenant B's webhooks: every 0.5 s one instance as the Gong webhook starts it
    (`gong_ingest_start` at live priority; its transcript inline, so B's runs do not also wait on
    the fake Gong's rate limit), for as long as A's backfill runs and `--tail` s after it;
  - a sampler that reads, every 0.2 s, how many leases are live (A's, B's) and A's backlog
    (A's instances due and unclaimed).

Figures, from the ledger: B's queue wait (from its creation, when it is ready, to its first claim,
`started_at - created_at`) p50 / p99 / max against the goal p99 ≤ 2 s; A's slot use: over the
samples where A had a backlog, the share of all worker slots busy and the share of the slots B
left free that A held. A slot is also free for the instant between a turn's end and the next
claim, which on a loaded machine is not nothing; `--reference` first runs A's backfill alone, so
the goal — A uses every slot B leaves — reads as: A holds as large a share of them beside B as
alone. With `--limit-a N` A runs under an operator's concurrency limit of N (the Limits page's
table) and its slot use is read against N instead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "bench"))

from pipelines import ensure_database, setup_django, start_workers, stop_workers  # noqa: E402

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/runledger_bench_fairness"
A, B = "tenant-a", "tenant-b"
WORKFLOW = "gong-ingest"


def clear() -> None:
    """The two tenants' rows from an earlier run, and any limit left on them."""
    from ingest.engine.models import ApiCost, ConcurrencyLimit, DeadLetter, History, Instance
    from ingest.pipelines.models import Fact, FactHead, SignalEvaluation

    for model in (History, ApiCost, DeadLetter, Instance, Fact, FactHead, SignalEvaluation):
        model.objects.filter(tenant__in=[A, B]).delete()
    ConcurrencyLimit.objects.filter(key__in=[A, B]).delete()


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


class Sampler(threading.Thread):
    """Live leases of A and B and A's backlog, every `every` seconds, until stopped."""

    def __init__(self, every: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.every, self.stop, self.rows = every, threading.Event(), []  # type: ignore[var-annotated]

    def run(self) -> None:
        from django.db import connection

        sql = """
            SELECT count(*) FILTER (WHERE tenant = %s AND lease_owner <> '' AND lease_expires_at >= now()),
                   count(*) FILTER (WHERE tenant = %s AND lease_owner <> '' AND lease_expires_at >= now()),
                   count(*) FILTER (WHERE tenant = %s AND ready_at <= now()
                                    AND status NOT IN ('complete', 'completed_with_errors', 'errored',
                                                       'terminated', 'paused')
                                    AND (lease_expires_at IS NULL OR lease_expires_at < now()))
            FROM engine_instance WHERE tenant IN (%s, %s)
        """
        try:
            while not self.stop.is_set():
                with connection.cursor() as cursor:
                    cursor.execute(sql, [A, B, A, A, B])
                    self.rows.append(cursor.fetchone())
                self.stop.wait(self.every)
        finally:
            connection.close()


def backfill(fake_url: str, start: str, end: str, done: threading.Event, failed: list[BaseException]) -> None:
    from io import StringIO

    from django.core.management import call_command
    from django.db import connection

    try:
        call_command(
            "ingest_pull",
            "gong",
            "--tenant",
            A,
            "--from",
            start,
            "--to",
            end,
            "--base-url",
            fake_url,
            "--no-progress",
            stdout=StringIO(),
            stderr=StringIO(),
        )
    except BaseException as exc:  # reported by the main thread
        failed.append(exc)
    finally:
        done.set()
        connection.close()


def webhooks(corpus: list[Any], stop: threading.Event, every: float) -> int:
    """B's live webhooks, one every `every` seconds on a fixed schedule, until `stop`."""
    from ingest.workflows.gong import gong_ingest_start

    sent, began = 0, time.monotonic()
    while not stop.is_set():
        call = corpus[sent % len(corpus)]
        gong_ingest_start(
            B,
            {"id": f"b{sent:06d}", "title": call.title, "started": call.started.isoformat(), "account": call.account},
            transcript=call.transcript_text(),
            actor="gong-webhook",
        )
        sent += 1
        stop.wait(max(0.0, began + sent * every - time.monotonic()))
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=5000, help="tenant A's backfill, Gong calls")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8, help="instances in flight per worker")
    parser.add_argument("--delay", type=float, default=0.2, help="the fake LLM's answer time, seconds")
    parser.add_argument("--rate", type=float, default=2.0, help="tenant B's webhooks a second")
    parser.add_argument(
        "--tail", type=float, default=5.0, help="seconds B's webhooks go on after A's backfill is pulled"
    )
    parser.add_argument("--limit-a", type=int, default=None, help="an operator's concurrency limit for A")
    parser.add_argument(
        "--reference", action="store_true", help="first run A's backfill alone, for its slot use without B beside it"
    )
    args = parser.parse_args()

    url = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    if not url.startswith("postgres"):
        raise SystemExit("the fairness bench runs on PostgreSQL (several worker processes); set DATABASE_URL")
    # The pull's Gong calls (this process only): A's backlog builds in seconds, not minutes.
    os.environ["RUNLEDGER_RATE_LIMITS"] = "gong=200:200"
    os.environ.update(GONG_ACCESS_KEY="gong-key", GONG_ACCESS_KEY_SECRET="gong-secret")
    ensure_database(url)
    setup_django()
    from ingest.demo.corpus import demo_calls

    calls_a = demo_calls(seed=11, count=args.calls)
    calls_b = demo_calls(seed=12, count=200)
    slots = args.workers * args.concurrency
    print(
        f"A backfills {args.calls} Gong calls; B's webhooks at {args.rate:g}/s; {args.workers} workers × "
        f"{args.concurrency} = {slots} slots; LLM answers in {args.delay * 1000:.0f} ms"
        + (f"; A limited to {args.limit_a}" if args.limit_a is not None else "")
    )
    alone = None
    if args.reference:
        alone = run(args, calls_a, calls_b, url, rate=0.0)
        print("A alone: " + slot_use_line(alone, slots=slots, limit_a=args.limit_a))
    both = run(args, calls_a, calls_b, url, rate=args.rate)
    report(both, slots=slots, limit_a=args.limit_a, calls=args.calls, alone=alone)


@dataclass
class Run:
    samples: list[tuple[int, int, int]]
    waits: list[float]
    sent: int
    pull_s: float
    drain_s: float
    statuses: dict[str, int]


def run(args: argparse.Namespace, calls_a: list[Any], calls_b: list[Any], url: str, *, rate: float) -> Run:
    from django.db import connection

    from ingest.engine.models import Instance
    from ingest.engine.services.limits import concurrency_limit_set
    from tests.fakes import FakeGong, FakeOpenAI

    clear()
    if args.limit_a is not None:
        concurrency_limit_set(workflow=WORKFLOW, key=A, max_concurrent=args.limit_a, actor="bench")
    slots = args.workers * args.concurrency
    with FakeOpenAI() as llm, FakeGong(calls_a, page_size=100) as gong:
        llm.delay = args.delay
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "RUNLEDGER_LLM_PROVIDER": "openai",
            "RUNLEDGER_LLM_BASE_URL": f"{llm.url}/v1",
            "RUNLEDGER_LLM_API_KEY": llm.api_key or "",
            "RUNLEDGER_LLM_MODEL": "gpt-4o-mini",
            "RUNLEDGER_PRICER": "ingest.pipelines.pricer.price_usage",
            "RUNLEDGER_EMBEDDINGS": "off",
            "RUNLEDGER_LOG_LEVEL": "WARNING",
        }
        connection.close()
        procs = start_workers(args.workers, args.concurrency, env)
        sampler = Sampler()
        pulled, stop_b, failed = threading.Event(), threading.Event(), []  # type: ignore[var-annotated]
        start = min(c.started for c in calls_a).isoformat()
        end = (max(c.started for c in calls_a) + timedelta(seconds=1)).isoformat()
        try:
            began = time.monotonic()
            sampler.start()
            threading.Thread(target=backfill, args=(gong.url, start, end, pulled, failed), daemon=True).start()

            def stop_after_pull() -> None:
                pulled.wait()
                time.sleep(args.tail)
                stop_b.set()

            threading.Thread(target=stop_after_pull, daemon=True).start()
            if rate > 0:
                sent = webhooks(calls_b, stop_b, 1.0 / rate)
            else:  # the reference run: A alone, for as long as it would run beside B
                stop_b.wait()
                sent = 0
            if failed:
                raise SystemExit(f"the backfill failed: {failed[0]}")
            pull_s = time.monotonic() - began
            total = args.calls + sent
            deadline = time.monotonic() + max(600.0, 20 * args.calls * args.delay / slots)
            while Instance.objects.filter(tenant__in=[A, B], status__in=["complete", "errored"]).count() < total:
                if time.monotonic() > deadline:
                    raise SystemExit("the instances did not all finish in time")
                time.sleep(0.5)
            drain_s = time.monotonic() - began
        finally:
            sampler.stop.set()
            sampler.join()
            stop_workers(procs)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM started_at - created_at) FROM engine_instance "
            "WHERE tenant = %s AND started_at IS NOT NULL",
            [B],
        )
        waits = [float(r[0]) for r in cursor.fetchall()]
        cursor.execute("SELECT status, count(*) FROM engine_instance WHERE tenant IN (%s, %s) GROUP BY status", [A, B])
        statuses = dict(cursor.fetchall())
    return Run(sampler.rows, waits, sent, pull_s, drain_s, statuses)


def slot_use(r: Run, *, slots: int, limit_a: int | None) -> tuple[int, float, float]:
    """Over the samples where A had a backlog: how many, the share of all slots busy, and the
    share of the slots B left free (up to A's limit) that A held."""
    backlogged = [(a, b) for a, b, backlog in r.samples if backlog > 0]
    busy = statistics.mean((a + b) / slots for a, b in backlogged) if backlogged else float("nan")
    cap = slots if limit_a is None else min(limit_a, slots)
    free = [(a, min(cap, slots - b)) for a, b in backlogged if min(cap, slots - b) > 0]
    held = statistics.mean(a / f for a, f in free) if free else float("nan")
    return len(backlogged), busy, held


def slot_use_line(r: Run, *, slots: int, limit_a: int | None) -> str:
    n, busy, held = slot_use(r, slots=slots, limit_a=limit_a)
    what = "every slot" if limit_a is None else f"its limit of {limit_a}"
    peak = max((backlog for _, _, backlog in r.samples), default=0)
    return (
        f"while A had a backlog (peak {peak} due and unclaimed; {n} samples of 0.2 s, {r.drain_s:.1f} s in all): "
        f"slots busy {busy:.1%}; "
        f"A held {held:.1%} of {what} that B left"
    )


def report(r: Run, *, slots: int, limit_a: int | None, calls: int, alone: Run | None) -> None:
    p99 = pct(r.waits, 0.99)
    print(
        f"A's {calls} calls pulled and B's {r.sent} webhooks sent in {r.pull_s:.1f} s; all done in "
        f"{r.drain_s:.1f} s ({r.statuses})"
    )
    print(
        f"B's queue wait (created → first claim), {len(r.waits)} instances: p50 {pct(r.waits, 0.5):.3f} s, "
        f"p99 {p99:.3f} s, max {max(r.waits, default=float('nan')):.3f} s — goal p99 ≤ 2 s: "
        f"{'met' if p99 <= 2.0 else 'MISSED'}"
    )
    print("A beside B: " + slot_use_line(r, slots=slots, limit_a=limit_a))
    if alone is not None:
        # The slots A leaves between a turn's end and its next claim are the engine's and the
        # machine's, not the fairness's: B beside A should cost A no more than that.
        _, _, held = slot_use(r, slots=slots, limit_a=limit_a)
        _, _, held_alone = slot_use(alone, slots=slots, limit_a=limit_a)
        print(
            f"A's slot use beside B vs alone: {held:.1%} vs {held_alone:.1%} — goal: no fewer slots than alone "
            f"(within 3 points): {'met' if held >= held_alone - 0.03 else 'MISSED'}"
        )


if __name__ == "__main__":
    main()
