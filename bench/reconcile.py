"""Lost webhooks benchmark on PostgreSQL: prints its figures; not a test.

    .venv/bin/python bench/reconcile.py                    # 1,000 calls, 10 % of webhooks lost
    .venv/bin/python bench/reconcile.py --calls 200 --lost 0.2

A fake Gong (tests/fakes, the real API's wire format, pages of 100) holds N calls started in the
last two hours. Their webhooks are posted to `/hooks/gong/<key>` (Django's test client, in this
process), but a seeded random tenth is dropped, as a webhook lost in transit. A worker (8
threads, in this process) ingests what the webhooks started, at a rate limit set high for that
part (what it measures is the pull, not Gong's 3 calls a second over 900 transcripts). Then the
connection gets Gong's own limit back (3 calls/s, shared bucket) and the tenant's schedule
`reconcile-bench` fires once, as the scheduler fires it every RUNLEDGER_RECONCILE_MINUTES.

Printed: the webhooks posted and lost; the pull's calls listed, started and found already
started, its wall time and its Gong requests (with the most in any one second); the time from
the fire to the last of the N ingests' completion, against the pull interval; the calls with an
instance (all N), the calls ingested twice (an instance of a call created twice, or a call's
transcript fetched twice); and a second pull, which must start nothing.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import os
import random
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import engine as base  # noqa: E402 - after the path is set

base.DB_NAME = os.environ.get("BENCH_DB", "runledger_bench_reconcile")
TENANT = "bench"
FAST = {"per_second": 10_000, "burst": 1_000}


def wait_for(check, *, limit_s: float, what: str) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > limit_s:
            raise RuntimeError(f"{what} did not happen within {limit_s:g} s")
        time.sleep(0.05)
    return time.monotonic() - start


def most_in_a_second(arrivals: list[float]) -> int:
    times = sorted(arrivals)
    return max((sum(1 for t in times[i:] if t < start + 1.0) for i, start in enumerate(times)), default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--lost", type=float, default=0.1, help="share of webhooks dropped")
    args = parser.parse_args()
    os.environ["RUNLEDGER_EMBEDDINGS"] = "off"
    # The connection's credentials are encrypted at rest: a key made for this bench only.
    os.environ.setdefault(
        "RUNLEDGER_SECRET_KEYS", base64.urlsafe_b64encode(b"runledger-bench-reconcile-32byte").decode()
    )
    base.setup_django()

    from django.conf import settings
    from django.test import Client
    from django.utils import timezone

    from ingest.demo.corpus import demo_calls
    from ingest.engine.models import Instance
    from ingest.engine.worker.loop import Worker
    from ingest.pipelines.selectors import config_cache_clear
    from ingest.pipelines.services import connection_upsert, keyword_list_set
    from ingest.triggers.services import schedule_run_now
    from ingest.workflows.reconcile import reconcile_schedule_name, reconcile_schedules_ensure
    from tests.fakes import FakeGong
    from tests.fakes.gong import extensive_json

    now = datetime.now(UTC)
    calls = [
        dataclasses.replace(c, started=now - timedelta(minutes=120) + timedelta(seconds=7 * i))
        for i, c in enumerate(demo_calls(count=args.calls))
    ]
    lost = set(random.Random(7).sample([c.id for c in calls], round(args.calls * args.lost)))
    fake = FakeGong(calls, page_size=100).start()
    worker = Worker(concurrency=8, poll_seconds=0.2).start()

    def upsert(options: dict) -> None:
        connection_upsert(
            tenant=TENANT,
            kind="gong",
            base_url=fake.url,
            key="gong-key",
            secret="gong-secret",
            webhook_key="hook-bench",
            options=options,
        )
        config_cache_clear()

    def ingests(**filters) -> int:
        return Instance.objects.filter(workflow="gong-ingest", tenant=TENANT, **filters).count()

    try:
        upsert({"rate_limit": FAST})
        keyword_list_set(tenant=TENANT, keywords=["budget", "pricing", "price", "proposal"])
        client, posted = Client(), 0
        for call in calls:
            if call.id in lost:
                continue
            body = json.dumps({"callData": extensive_json(call, fake.url), "isTest": False})
            assert client.post("/hooks/gong/hook-bench", body, content_type="application/json").status_code == 202
            posted += 1
        wait_for(lambda: ingests(status="complete") == posted, limit_s=1800, what="the webhooks' ingests")
        print(
            f"reconcile bench: {args.calls:,} calls, {posted:,} webhooks posted, {len(lost):,} lost "
            f"(load {os.getloadavg()[0]:.1f})"
        )

        upsert({})  # Gong's own limit for the pull: 3 calls/s through the shared bucket
        before = len(fake.requests)
        reconcile_schedules_ensure(timezone.now())
        name = reconcile_schedule_name(TENANT)
        pull = schedule_run_now(name=name, now=timezone.now(), actor="bench")
        pull_s = wait_for(
            lambda: Instance.objects.filter(id=pull, status__in=("complete", "completed_with_errors")).exists(),
            limit_s=600,
            what="the pull",
        )
        all_s = pull_s + wait_for(
            lambda: ingests(status="complete") == args.calls, limit_s=1800, what="every call's ingest"
        )
        output = Instance.objects.get(id=pull).output
        pulled = fake.requests[before:]
        interval = settings.RUNLEDGER_RECONCILE_MINUTES * 60
        metrics = output["metrics"]
        print(
            f"  pull: listed {metrics['gong_listed']:,}, started {metrics['gong_started']:,}, already started "
            f"{metrics['gong_listed'] - metrics['gong_started']:,}; {pull_s:.1f} s, {len(pulled)} Gong requests "
            f"(most in one second: {most_in_a_second([r.at for r in pulled])}; limit 3/s)"
        )
        print(
            f"  every call ingested {all_s:.1f} s after the fire; the pull interval is {interval} s "
            f"({'within' if all_s <= interval else 'NOT within'} one interval)"
        )
        started_of = Counter(i.params["call_id"] for i in Instance.objects.filter(workflow="gong-ingest"))
        fetched = Counter(
            i for r in fake.requests_to("POST /v2/calls/transcript") for i in r.json()["filter"]["callIds"]
        )
        print(
            f"  calls with an instance {len(started_of):,} of {args.calls:,}; ingested twice: "
            f"{sum(1 for n in started_of.values() if n > 1)} instances, "
            f"{sum(1 for n in fetched.values() if n > 1)} transcripts fetched twice"
        )
        again = schedule_run_now(name=name, now=timezone.now() + timedelta(seconds=1), actor="bench")
        wait_for(
            lambda: Instance.objects.filter(id=again, status="complete").exists(), limit_s=600, what="the second pull"
        )
        second = Instance.objects.get(id=again).output["metrics"]
        print(
            f"  second pull: listed {second['gong_listed']:,}, started {second['gong_started']}; "
            f"gong-ingest instances {ingests():,}"
        )
    finally:
        worker.stop(timeout=30)
        fake.stop()


if __name__ == "__main__":
    main()
