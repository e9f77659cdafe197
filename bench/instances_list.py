"""Instances list and bulk actions over 1 M instances on PostgreSQL (issue 19).

    .venv/bin/python bench/dashboard.py --generate-only     # the 1 M-instance ledger (once)
    .venv/bin/python bench/instances_list.py                # attributes (resumable), then measure
    .venv/bin/python bench/instances_list.py --runs 40 --bulk 10000

Setup: every bench instance gets search attributes (customer: 2,000 values, ~500 instances each;
domain: 100 values, ~10,000 each) in `engine_instance_attributes`, by INSERT … SELECT in chunks
of 100,000 ids (resumable: chunks already present are skipped); the triggers of migration 0020
write one engine_instance_attribute_values row per key; then VACUUM ANALYZE of both tables.

Fan-out items (`--fan-out-items N`, once): N instances that are items of 50 bench runs' fan-outs
(`--fan-out-parents`), as the engine writes them, so the list's "top-level only" default has items
to leave out, and one run's items (`?parent=`) are a list of their own.

List: each URL is fetched with Django's test Client as the demo `operator` (acme, globex, default:
~5/8 of the rows): once to warm, then `--runs` times; server time p50 and p99 (nearest rank)
against the 150 ms goal.

Bulk: a filter matching about `--bulk` active instances is previewed (the freeze of its ids, as
the page's preview does), then a pause of the frozen set runs through `batch_chunk` (the step the
`runledger-batch` workflow runs) at the top rate cap, and a resume of the same ids restores them:
time to preview, and actions per second of each.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.dashboard import DEFAULT_URL, ensure_database, setup_django  # noqa: E402

GOAL_MS = 150.0
CHUNK = 100_000


def attributes_setup(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        for lo in range(1, 1_000_001, CHUNK):
            hi = lo + CHUNK - 1
            if conn.execute(
                "SELECT 1 FROM engine_instance_attributes WHERE instance_id = %s", [f"bench-{hi:07d}"]
            ).fetchone():
                continue
            t0 = time.monotonic()
            conn.execute(f"""
                INSERT INTO engine_instance_attributes (instance_id, attributes)
                SELECT 'bench-' || lpad(i::text, 7, '0'),
                       jsonb_build_object('customer', 'cust-' || (abs(hashint8(i::bigint * 31 + 7)) % 2000),
                                          'domain', 'd' || (abs(hashint8(i::bigint * 17 + 3)) % 100) || '.example')
                FROM generate_series({lo}, {hi}) i
                ON CONFLICT (instance_id) DO NOTHING""")
            print(f"  attributes {lo}..{hi} in {time.monotonic() - t0:.1f} s", flush=True)
        # Freshly inserted rows: set their hint bits and the visibility map once here, not in
        # the first measured reads.
        for table in ("engine_instance_attributes", "engine_instance_attribute_values"):
            _vacuum_until_visible(conn, table)
            n = conn.execute(
                f"SELECT count(*), pg_size_pretty(pg_total_relation_size('{table}')) "  # noqa: S608
                f"FROM {table}"
            ).fetchone()
            print(f"  {table}: {n[0] if n else 0:,} rows, {n[1] if n else '?'} with its indexes", flush=True)


def fan_out_setup(items: int, *, parents: int = 50) -> None:
    """`items` fan-out items (url-classify, tenant acme, created over the last 30 days, with a
    customer attribute) under `parents` bench instances, as the engine writes them: an instance
    with its parent, a FanOutItem row, one FanOut per parent. Skipped when already there."""
    from datetime import timedelta

    from django.db import connection
    from django.utils import timezone

    from ingest.engine.models import FanOut, FanOutItem, Instance, InstanceAttributes, Step

    if not items or FanOut.objects.filter(step_name="bench-fan-out").count() >= parents:
        return
    t0, now, per = time.monotonic(), timezone.now(), items // parents
    for p in range(parents):
        parent = Instance.objects.get(id=f"bench-{p * 997 + 1:07d}")
        step = Step.objects.create(
            instance=parent, name="bench-fan-out", seq=1, position=99, kind="fan_out", status="complete", started_at=now
        )
        fan = FanOut.objects.create(
            instance=parent,
            step=step,
            step_name="bench-fan-out",
            handler="url-classify",
            handler_kind="workflow",
            item_workflow="url-classify",
            expected=per,
            created=per,
            received=per,
            started_at=now,
            updated_at=now,
            deadline=now,
            state="complete",
        )
        rows = [
            Instance(
                id=f"_fo{fan.id}-{i}",
                workflow="url-classify",
                tenant="acme",
                status="complete",
                params={"url": f"https://site{i}.example/"},
                parent_id=parent.id,
                parent_step="bench-fan-out",
                created_at=now - timedelta(seconds=(p * per + i) * 30 * 86400 // items),
                updated_at=now,
                started_at=now,
                ended_at=now,
            )
            for i in range(per)
        ]
        Instance.objects.bulk_create(rows, batch_size=2000)
        FanOutItem.objects.bulk_create(
            [FanOutItem(instance_id=r.id, fan_out=fan, index=i, state="complete") for i, r in enumerate(rows)],
            batch_size=2000,
        )
        InstanceAttributes.objects.bulk_create(
            [
                InstanceAttributes(instance_id=r.id, attributes={"customer": f"cust-{i % 2000}"})
                for i, r in enumerate(rows)
            ],
            batch_size=2000,
        )
    with connection.cursor() as cursor:
        for table in (
            "engine_instance",
            "engine_fanoutitem",
            "engine_fanout",
            "engine_step",
            "engine_instance_attributes",
            "engine_instance_attribute_values",
        ):
            cursor.execute(f"ANALYZE {table}")
    print(f"  fan-out items: {parents * per:,} under {parents} parents in {time.monotonic() - t0:.1f} s", flush=True)


def _vacuum_until_visible(conn: Any, table: str, *, tries: int = 20) -> None:
    """VACUUM ANALYZE `table` until its visibility map covers 95 % of its pages, as autovacuum
    keeps a table whose rows stopped changing. A VACUUM can leave rows just written not
    all-visible while another transaction of the database holds an older snapshot (an
    autovacuum ANALYZE of the freshly generated ledger, say); an index-only scan then reads the
    table page of every such entry, which is not the steady state this bench measures."""
    for attempt in range(tries):
        conn.execute(f"VACUUM ANALYZE {table}")
        row = conn.execute("SELECT relallvisible, relpages FROM pg_class WHERE relname = %s", [table]).fetchone()
        visible, pages = (row[0], row[1]) if row else (0, 0)
        if pages == 0 or visible >= 0.95 * pages:
            print(f"  {table}: {visible:,} of {pages:,} pages all-visible", flush=True)
            return
        print(
            f"  {table}: {visible:,} of {pages:,} pages all-visible after VACUUM {attempt + 1}; "
            "an older snapshot is open, trying again in 5 s",
            flush=True,
        )
        time.sleep(5)
    raise SystemExit(f"{table}: the visibility map stays under 95 % (a long transaction is open?)")


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def list_urls() -> list[tuple[str, str]]:
    return [
        (
            "2 statuses + attr customer, sort started",
            "/instances/?status=errored&status=running&attr=customer:cust-42&sort=-started",
        ),
        (
            "part of workflow + status + attr domain, sort duration",
            "/instances/?workflow=ingest&status=complete&attr=domain:d7.example&sort=-duration",
        ),
        ("attr customer, sort by attr domain", "/instances/?attr=customer:cust-1234&sort=attr.domain"),
        (
            "attr domain (10k) + 2 statuses, newest first",
            "/instances/?attr=domain:d3.example&status=errored&status=paused",
        ),
        ("3 statuses, sort updated", "/instances/?status=errored&status=paused&status=waiting&sort=-updated"),
        ("24h, sort duration", "/instances/?range=24h&sort=-duration"),
        ("step=llm-extract + workflow", "/instances/?workflow=gong-ingest&step=llm-extract"),
        ("7d + attr customer, sort cost", "/instances/?range=7d&attr=customer:cust-77&sort=-cost"),
        ("no filter (count capped at 10,000)", "/instances/"),
        # The attribute grammar's OR and negation, and the list with fan-out items and child runs.
        ("attr customer OR customer + status", "/instances/?status=errored&attr=customer:cust-42|cust-43"),
        ("attr domain, not another customer", "/instances/?attr=domain:d3.example&attr=!customer:cust-42"),
        ("status + only a negated attr (instances path)", "/instances/?status=paused&attr=!domain:d3.example"),
        ("no filter, with items (top=0)", "/instances/?top=0"),
        ("one run's fan-out items (parent=), newest first", "/instances/?parent=bench-0000001"),
        ("one run's fan-out items, oldest first", "/instances/?parent=bench-0000001&sort=created"),
    ]


def measure_list(runs: int) -> None:
    from bench.dashboard import _operator_client

    client = _operator_client()
    print(f"instances list, server time over {runs} runs (goal p99 <= {GOAL_MS:.0f} ms)  ({_load()})", flush=True)
    for label, url in list_urls():
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - t0) * 1000)
        p50, p99 = statistics.median(times), _p(times, 0.99)
        flag = "ok " if p99 <= GOAL_MS else "MISS"
        print(f"  {flag} p50 {p50:7.1f} ms  p99 {p99:7.1f} ms  {label}   {url[:90]}", flush=True)
    print(f"  ({_load()})", flush=True)


def _bulk_query(target: int) -> str:
    """Active instances (running, waiting, queued) of the operator's tenants created since a time
    chosen so that about `target` match."""
    from datetime import timedelta

    from django.utils import timezone

    from ingest.engine.models import Instance

    active = Instance.objects.filter(
        tenant__in=["acme", "globex", "default"], status__in=["running", "waiting", "queued"]
    )
    total = active.count()
    days = min(30.0, 30.0 * target / max(1, total))
    since = timezone.now() - timedelta(days=days)
    return f"status=running&status=waiting&status=queued&since={since:%Y-%m-%dT%H:%M}"


def measure_bulk(target: int) -> None:
    from django.contrib.auth import get_user_model
    from django.http import QueryDict

    from dashboard import bulk
    from ingest.engine.models import Batch, BatchItem, Instance
    from ingest.engine.services import batches

    user = get_user_model().objects.get(username="operator")
    query = _bulk_query(target)
    t0 = time.perf_counter()
    preview = bulk.bulk_preview(user=user, query=QueryDict(query), action="pause")
    preview_s = time.perf_counter() - t0
    n = preview.batch.total
    print(f"bulk: preview (count + freeze) of {n:,} instances in {preview_s * 1000:.0f} ms  ({_load()})", flush=True)
    ids = list(BatchItem.objects.filter(batch=preview.batch).values_list("instance_id", flat=True))
    for action, batch in (("pause", preview.batch), ("resume", None)):
        if batch is None:  # the resume acts on the same ids, now paused
            batch = Batch.objects.create(
                action="resume",
                actor="bench",
                user_id=str(user.pk),
                query=query,
                tenants=preview.batch.tenants,
                created_at=preview.batch.created_at,
                total=n,
            )
            BatchItem.objects.bulk_create(
                [
                    BatchItem(batch=batch, instance_id=i, tenant=t)
                    for i, t in Instance.objects.filter(id__in=ids).values_list("id", "tenant")
                ],
                batch_size=5000,
            )
        started = (
            batches.batch_confirm(
                batch_id=batch.id, user_id=str(user.pk), reason="bench", rate_per_second=batches.MAX_RATE
            )
            if batch.state == "previewed"
            else None
        )
        Instance.objects.filter(workflow=batches.BATCH_WORKFLOW, id__in=started.instance_ids if started else []).update(
            status="terminated"
        )  # the bench drives the chunks itself; no worker runs these
        Batch.objects.filter(id=batch.id).update(state="running")
        tenants = sorted(set(BatchItem.objects.filter(batch=batch).values_list("tenant", flat=True)))
        t0 = time.perf_counter()
        done = 0
        for tenant in tenants:
            while True:
                r = batches.batch_chunk(batch_id=batch.id, tenant=tenant, rate_per_second=batches.MAX_RATE)
                done += r["done"] + r["skipped"] + r["failed"]
                if r["remaining"] == 0:
                    break
        took = time.perf_counter() - t0
        p = batches.batch_progress(batch_id=batch.id)
        print(
            f"bulk {action}: {done:,} instances in {took:.1f} s = {done / took:.0f} actions/s "
            f"(cap {batches.MAX_RATE:g}/s; done {p.done:,}, skipped {p.skipped:,}, failed {p.failed:,})  ({_load()})",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("DATABASE_URL") or DEFAULT_URL)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--bulk", type=int, default=10_000, help="instances the bulk action matches (0: skip)")
    parser.add_argument("--skip-setup", action="store_true")
    parser.add_argument("--list-only", action="store_true")
    parser.add_argument("--bulk-only", action="store_true")
    parser.add_argument(
        "--fan-out-items",
        type=int,
        default=0,
        help="add this many fan-out items (under --fan-out-parents runs) before measuring, once (default 0)",
    )
    parser.add_argument(
        "--fan-out-parents",
        type=int,
        default=50,
        help="runs the fan-out items are shared among (default 50; 10 for fan-outs of 10,000 "
        "with --fan-out-items 100000)",
    )
    args = parser.parse_args()
    ensure_database(args.url)
    setup_django(args.url)
    if not args.skip_setup:
        attributes_setup(args.url)
    fan_out_setup(args.fan_out_items, parents=args.fan_out_parents)
    if not args.bulk_only:
        measure_list(args.runs)
    if args.bulk and not args.list_only:
        measure_bulk(args.bulk)


if __name__ == "__main__":
    main()
