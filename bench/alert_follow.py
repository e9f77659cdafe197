"""Does the alert follower act on every row: failures counted against failures written while the
follower runs, over several runs.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_bench_follow \\
        .venv/bin/python bench/alert_follow.py --failures 100 --runs 16

What it does: migrates the database, clears its own rows, makes one rule "instance failed"
(throttled, so each failure only adds to the one alert's count) on a webhook channel nobody
delivers to (no worker runs), then per run: `--writers` threads write `--failures` `errored`
history rows of one workflow between them, each in a transaction of its own, a random 0–2 ms
apart, while this thread runs follow_round back to back (as AlertRunner does under load, without
its 1 s pause). Once the writers are done it follows to the end and prints, per run, the failures
the alert counted against those written, and the runs that lost any. PostgreSQL only: SQLite
lets one writer in at a time, and the round holds the write lock.
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    # The bench's own channel row is sealed with a key of the bench's, as bench/ingress.py does.
    os.environ.setdefault(
        "RUNLEDGER_SECRET_KEYS",
        base64.urlsafe_b64encode(b"runledger-bench-follows-32-bytes").decode(),
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def one_run(*, failures: int, writers: int) -> int:
    """Failures the alert counted in one run."""
    from django.db import connections
    from django.utils import timezone

    from ingest.alerts.follow import follow_round, follow_start
    from ingest.alerts.models import Alert, Channel, FollowState, Notification, Rule
    from ingest.alerts.services import channel_save, rule_save
    from ingest.engine.models import History, HistoryKind

    Notification.objects.all().delete()
    Alert.objects.all().delete()
    Rule.objects.all().delete()
    Channel.objects.all().delete()
    FollowState.objects.all().delete()
    History.objects.filter(workflow="bench-follow-fail").delete()
    follow_start(now=timezone.now())
    channel = channel_save(
        tenant="bench",
        name="nobody",
        kind="webhook",
        secrets={"url": "http://127.0.0.1:9/", "hmac_key": "k" * 32},
        now=timezone.now(),
    )
    rule = rule_save(
        tenant="bench",
        name="failures",
        condition="instance_failed",
        params={},
        channel_ids=[channel.id],
        throttle_seconds=86400,
        now=timezone.now(),
    )

    def write(n: int) -> None:
        try:
            for i in range(n):
                History.objects.create(
                    instance_id=f"bench-follow-{threading.get_ident()}-{i}",
                    workflow="bench-follow-fail",
                    tenant="bench",
                    kind=HistoryKind.INSTANCE_STATUS,
                    status="errored",
                    data={"error": "Declined", "message": "the bench's failure"},
                    created_at=timezone.now(),
                )
                time.sleep(random.uniform(0, 0.002))
        finally:
            connections.close_all()

    share = [failures // writers + (1 if i < failures % writers else 0) for i in range(writers)]
    threads = [threading.Thread(target=write, args=(n,)) for n in share]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        follow_round(now=timezone.now())
    for t in threads:
        t.join()
    while follow_round(now=timezone.now()):
        pass
    alert = Alert.objects.filter(rule=rule).first()
    return alert.count if alert else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--failures", type=int, default=100)
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--writers", type=int, default=2)
    args = parser.parse_args()
    setup()
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit("PostgreSQL only: set DATABASE_URL=postgres://…")
    counted = [one_run(failures=args.failures, writers=args.writers) for _ in range(args.runs)]
    lost = [c for c in counted if c != args.failures]
    print(f"failures written per run: {args.failures}, writers: {args.writers}")
    print(f"counted per run: {' '.join(map(str, counted))}")
    print(
        f"runs that lost a failure: {len(lost)} of {args.runs}; "
        f"failures lost in all: {sum(args.failures - c for c in counted)}"
    )


if __name__ == "__main__":
    main()
