"""Alert latency: seconds from an instance failing to a webhook receiver getting its alert.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_bench_alerts \
        .venv/bin/python bench/alerts.py --instances 100

What it does: migrates the database, clears its own rows, starts a signed-webhook receiver on
127.0.0.1 (it verifies every signature as a customer would), an in-process worker
(`--concurrency`) and the alert runner (`ingest.alerts.runner.AlertRunner`, its production
interval of 1 s unless `--interval`), with one rule "instance failed" whose throttle window is 0,
so each failure is its own notification. It then starts `--instances` instances of a workflow
that fails at once, `--spacing` seconds apart, and waits for every alert.

Failure time is the instance's `ended_at` in the ledger; arrival is the receiver's clock when
the request came in (same machine, same clock). The path measured: the failure's commit, the
follower's next round reading it, the rule firing (alert, notification and an `alert-deliver`
instance in one transaction), a worker claiming that instance, the signed POST. Prints p50, p99
and max over all alerts, and whether every signature verified.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
HMAC_KEY = "bench-alerts-hmac-key-0123456789"


def setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(args: argparse.Namespace) -> dict[str, Any]:
    from django.db import connection
    from django.utils import timezone

    from ingest.alerts.follow import follow_start
    from ingest.alerts.models import Alert, Channel, FollowState, Notification, Rule
    from ingest.alerts.runner import AlertRunner
    from ingest.alerts.services import channel_save, rule_save
    from ingest.engine import NonRetryableError, Workflow
    from ingest.engine.models import Instance
    from ingest.engine.services.instances import instance_create
    from ingest.engine.worker.loop import Worker
    from tests.fakes.receiver import WebhookReceiver

    class BenchFail(Workflow):
        name = "bench-alert-fail"

        def run(self, event: Any, step: Any) -> Any:
            def fail(ctx: Any) -> None:
                raise NonRetryableError("the bench's step fails at once")

            return step.do("fail", fail)

    Notification.objects.all().delete()
    Alert.objects.all().delete()
    Rule.objects.all().delete()
    Channel.objects.all().delete()
    FollowState.objects.all().delete()
    Instance.objects.filter(workflow__in=["bench-alert-fail", "alert-deliver"]).delete()
    follow_start(now=timezone.now())
    with WebhookReceiver(secret=HMAC_KEY) as receiver:
        channel = channel_save(
            tenant="bench",
            name="hook",
            kind="webhook",
            secrets={"url": receiver.url, "hmac_key": HMAC_KEY},
            now=timezone.now(),
        )
        rule_save(
            tenant="bench",
            name="failures",
            condition="instance_failed",
            params={},
            channel_ids=[channel.id],
            throttle_seconds=0,
            now=timezone.now(),
        )
        worker = Worker(concurrency=args.concurrency).start()
        runner = AlertRunner(interval=args.interval)
        runner.start()
        try:
            ids = []
            for i in range(args.instances):
                ids.append(
                    instance_create(workflow="bench-alert-fail", id=f"bench-fail-{i}", params={}, tenant="bench").id
                )
                time.sleep(args.spacing)
            got = receiver.wait_for(args.instances, timeout=args.timeout)
        finally:
            runner.stop()
            worker.stop(timeout=30)
        ended = {i: e.timestamp() for i, e in Instance.objects.filter(id__in=ids).values_list("id", "ended_at") if e}
    seconds = [r.at - ended[r.json()["facts"]["instance"]] for r in got]
    # Where the time goes: failure → notification row (the follower), row → receiver (the delivery).
    noted = {r.json()["facts"]["instance"]: r for r in got}
    follow = [
        n.created_at.timestamp() - ended[n.body["facts"]["instance"]]
        for n in Notification.objects.filter(kind__in=["firing", "summary"])
        if n.body["facts"]["instance"] in noted
    ]
    deliver = [
        noted[n.body["facts"]["instance"]].at - n.created_at.timestamp()
        for n in Notification.objects.filter(kind__in=["firing", "summary"])
        if n.body["facts"]["instance"] in noted
    ]
    return {
        "database": connection.vendor,
        "alerts": len(got),
        "expected": args.instances,
        "all_signed": all(r.signed for r in got),
        "interval_s": args.interval,
        "p50_s": round(statistics.median(seconds), 3),
        "p99_s": round(percentile(seconds, 0.99), 3),
        "max_s": round(max(seconds), 3),
        "follow_p50_s": round(statistics.median(follow), 3),
        "deliver_p50_s": round(statistics.median(deliver), 3),
        "deliver_p99_s": round(percentile(deliver, 0.99), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=100)
    parser.add_argument("--spacing", type=float, default=0.02, help="seconds between two failing starts")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--interval", type=float, default=1.0, help="the alert runner's round interval")
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args()
    setup()
    print(run(args))


if __name__ == "__main__":
    main()
