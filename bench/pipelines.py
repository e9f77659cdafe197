"""Pipeline benchmark: 1,000 Gong calls through `gong-ingest` on 2 worker processes (PostgreSQL),
extracting through a fake OpenAI-compatible API that answers in 200 ms.

    .venv/bin/python bench/pipelines.py --calls 1000 --concurrency 8 --runs 3

What it does: creates and migrates its own database (`runledger_bench_pipelines` on the local
PostgreSQL, or DATABASE_URL), starts the fake OpenAI server (tests/fakes) with `delay = 0.2`, and
two `manage.py worker` processes configured through the environment to extract with the
OpenAI-compatible client at the fake's URL (RUNLEDGER_LLM_*), pricing with the price table
(RUNLEDGER_PRICER), embeddings off unless --embeddings. Each run clears the bench tenant's rows,
creates the instances with transcripts inline (create_batch, 100 at a time) and waits until
all have finished.

It prints, per run and as medians: the wall time from the first create to the last completion
against the goal (1.3 × calls × delay ÷ total concurrency), the LLM calls the fake received
(exactly one per call when nothing fails), and how the workers' thread-time splits between the
LLM calls, the rest of the step code (fact writes, budgets, costs) and the engine (claiming,
replay, ledger writes, idle gaps between turns).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/runledger_bench_pipelines"
TENANT = "bench"


def ensure_database(url: str) -> None:
    from urllib.parse import urlparse

    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def clear() -> None:
    from ingest.engine.models import ApiCost, Budget, DeadLetter, History, Instance
    from ingest.models import Fact, SignalEvaluation

    History.objects.filter(tenant=TENANT).delete()
    ApiCost.objects.filter(tenant=TENANT).delete()
    DeadLetter.objects.filter(tenant=TENANT).delete()
    Instance.objects.filter(tenant=TENANT).delete()
    Fact.objects.filter(tenant=TENANT).delete()
    SignalEvaluation.objects.filter(tenant=TENANT).delete()
    Budget.objects.filter(key=TENANT).delete()


def start_workers(n: int, concurrency: int, env: dict[str, str]) -> list[subprocess.Popen[str]]:
    procs = [
        subprocess.Popen([sys.executable, "manage.py", "worker", "--concurrency", str(concurrency), "--poll", "0.2",
                          "--id", f"bench-{i}"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for i in range(n)
    ]
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "started" not in line:
            raise SystemExit(f"a worker did not start: {line!r}")
    return procs


def stop_workers(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(timeout=120)


def create_instances(calls: list[Any], run: int) -> None:
    from ingest.engine import create_batch
    from ingest.workflows.gong import gong_instance_id, gong_params

    items = []
    for n, call in enumerate(calls):
        call_id = f"{run}{n:06d}"
        params = gong_params({"call_id": call_id, "title": call.title, "started": call.started.isoformat(),
                              "account": call.account}, call.transcript_text())
        items.append({"id": gong_instance_id(TENANT, call_id), "params": {**params, "tenant": TENANT}, "tenant": TENANT})
    for i in range(0, len(items), 100):
        create_batch("gong-ingest", items[i:i + 100])


def wait_finished(total: int, timeout: float) -> None:
    from ingest.engine.models import Instance

    deadline = time.monotonic() + timeout
    while True:
        done = Instance.objects.filter(tenant=TENANT, status__in=["complete", "errored", "terminated"]).count()
        if done >= total:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"only {done} of {total} instances finished within {timeout:g} s")
        time.sleep(0.05)


def seconds(a: Any, b: Any) -> float:
    return (b - a).total_seconds()


def measure(calls: int, concurrency: int) -> dict[str, float]:
    from django.db.models import Max, Min

    from ingest.engine.models import Attempt, Instance

    instances = Instance.objects.filter(tenant=TENANT)
    span = instances.aggregate(first=Min("created_at"), last=Max("ended_at"))
    wall = seconds(span["first"], span["last"])
    llm = other = 0.0
    for name, started, ended in Attempt.objects.filter(step__instance__tenant=TENANT).values_list(
            "step__name", "started_at", "ended_at"):
        if ended is None:
            continue
        if name == "llm-extract":
            llm += seconds(started, ended)
        else:
            other += seconds(started, ended)
    thread_time = wall * concurrency
    errored = instances.exclude(status="complete").count()
    return {"wall": wall, "llm_share": llm / thread_time, "steps_share": other / thread_time,
            "engine_share": 1 - (llm + other) / thread_time, "errored": errored,
            "steps": Attempt.objects.filter(step__instance__tenant=TENANT).count() / calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8, help="instances in flight per worker")
    parser.add_argument("--delay", type=float, default=0.2, help="the fake LLM's answer time, seconds")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--embeddings", action="store_true", help="embed facts with WordLlama too")
    args = parser.parse_args()

    url = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    if not url.startswith("postgres"):
        raise SystemExit("the pipeline bench runs on PostgreSQL (several worker processes); set DATABASE_URL")
    ensure_database(url)
    setup_django()
    from django.db import connection

    from ingest.demo_corpus import demo_calls
    from tests.fakes import FakeOpenAI
    from tests.fakes.llm import CHAT

    corpus = demo_calls(seed=11, count=args.calls)
    total = args.workers * args.concurrency
    goal = 1.3 * args.calls * args.delay / total
    print(f"{args.calls} calls, {args.workers} workers × {args.concurrency} = {total} in flight, LLM answers in "
          f"{args.delay * 1000:.0f} ms; ideal {args.calls * args.delay / total:.2f} s, goal ≤ {goal:.2f} s")
    results: list[dict[str, float]] = []
    with FakeOpenAI() as fake:
        fake.delay = args.delay
        env = {**os.environ, "DATABASE_URL": url, "RUNLEDGER_LLM_PROVIDER": "openai",
               "RUNLEDGER_LLM_BASE_URL": f"{fake.url}/v1", "RUNLEDGER_LLM_API_KEY": fake.api_key or "",
               "RUNLEDGER_LLM_MODEL": "gpt-4o-mini", "RUNLEDGER_PRICER": "ingest.pricing.price_usage",
               "RUNLEDGER_EMBEDDINGS": "wordllama" if args.embeddings else "off", "RUNLEDGER_LOG_LEVEL": "WARNING"}
        for run in range(1, args.runs + 1):
            clear()
            connection.close()
            procs = start_workers(args.workers, args.concurrency, env)
            try:
                before = fake.count(CHAT)
                create_instances(corpus, run)
                wait_finished(args.calls, timeout=max(600.0, goal * 20))
            finally:
                stop_workers(procs)
            result = measure(args.calls, total)
            result["llm_calls"] = fake.count(CHAT) - before
            results.append(result)
            print(f"run {run}: wall {result['wall']:.2f} s ({result['wall'] / goal * 1.3:.2f}× ideal, goal "
                  f"{'met' if result['wall'] <= goal else 'missed'}); LLM calls {result['llm_calls']:.0f} for "
                  f"{args.calls} calls; errored {result['errored']:.0f}; {result['steps']:.1f} attempts/call; "
                  f"thread-time: LLM {result['llm_share']:.0%}, other step code {result['steps_share']:.0%}, "
                  f"engine+idle {result['engine_share']:.0%}")
    med = {k: statistics.median(r[k] for r in results) for k in results[0]}
    print(f"median of {len(results)}: wall {med['wall']:.2f} s vs goal {goal:.2f} s "
          f"({med['wall'] / (goal / 1.3):.2f}× ideal); LLM calls {med['llm_calls']:.0f}/{args.calls}; "
          f"thread-time: LLM {med['llm_share']:.0%}, other step code {med['steps_share']:.0%}, "
          f"engine+idle {med['engine_share']:.0%}")


if __name__ == "__main__":
    main()
