"""The gauges equal a straightforward count of the ledger (every row read and counted in Python),
on a ledger holding every kind of state they count, on both databases; and on PostgreSQL their
one statement reads the unfinished instances and open dead letters from indexes alone."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from dashboard.observability import gauges, sql
from ingest.engine.models import FINISHED_STATUSES, DeadLetter, History, Instance

pytestmark = pytest.mark.db

CLAIMABLE = {"queued", "running", "waiting", "waitingForPause"}


def counted(now: datetime) -> dict[str, Any]:
    """The gauges' figures by their definitions, with no index, filter or sample in between."""
    rows = list(Instance.objects.values_list("id", "workflow", "status", "ready_at", "lease_owner", "lease_expires_at"))
    live = [(i, w, s, r, o, e) for i, w, s, r, o, e in rows if s not in FINISHED_STATUSES]
    due = [
        (w, r) for _, w, s, r, _, e in live if s in CLAIMABLE and r is not None and r <= now and (e is None or e <= now)
    ]
    why: dict[str, Counter[str]] = {"step.sleep": Counter(), "step.wait": Counter(), "step.retry": Counter()}
    for i, w, s, *_ in live:
        if s == "waiting":
            kinds = [
                k
                for k in History.objects.filter(instance_id=i).order_by("id").values_list("kind", flat=True)
                if k in why
            ]
            if kinds:
                why[kinds[-1]][w] += 1
    return {
        "active": dict(Counter((w, s) for _, w, s, *_ in live)),
        "backlog": dict(Counter(w for w, _ in due)),
        "oldest_ready_at": min((r for _, r in due), default=None),
        "sleeping": dict(why["step.sleep"]),
        "waiting_event": dict(why["step.wait"]),
        "backing_off": dict(why["step.retry"]),
        "dead_letters": dict(Counter(d.workflow for d in DeadLetter.objects.all() if d.state == "open")),
        "slots": dict(Counter(o for _, _, _, _, o, e in live if o and e is not None and e > now)),
    }


def test_the_gauges_equal_a_straightforward_count_of_the_ledger(busy: None) -> None:
    now = timezone.now()
    read = gauges.ledger_read(now=now)
    got = {key: getattr(read, key) for key in counted(now)}
    assert got == counted(now)
    assert got["backlog"] and got["slots"] and got["sleeping"] and got["backing_off"]  # something was compared


def _scans(plan: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(node type, relation, index) of every scan in an EXPLAIN (FORMAT JSON) plan."""
    found = []
    if "Relation Name" in plan:
        found.append((plan["Node Type"], plan["Relation Name"], plan.get("Index Name", "")))
    for child in plan.get("Plans", []):
        found += _scans(child)
    return found


@pytest.mark.django_db(transaction=True)  # VACUUM runs outside a transaction
def test_the_statement_reads_unfinished_instances_and_open_dead_letters_from_indexes_only(
    busy: None, require_postgres: None
) -> None:
    now = timezone.now()
    with connection.cursor() as cursor:
        # As autovacuum leaves a ledger: the visibility map set, so an index-only scan need not
        # visit the table (on pages changed since, it does).
        cursor.execute("VACUUM ANALYZE engine_instance, engine_deadletter, engine_history")
    with transaction.atomic(), connection.cursor() as cursor:
        # A ledger this small is as cheap to read whole: make the planner show what it does at a
        # million rows, where scanning the table is out of the question.
        cursor.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off")
        cursor.execute(
            "EXPLAIN (FORMAT JSON) " + sql._GAUGES,
            {"now": now, "claim_since": now, "parked_exact": gauges.PARKED_EXACT},
        )
        row = cursor.fetchone()
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    scans = _scans(plan[0]["Plan"])
    on = {
        table: {(node, index) for node, rel, index in scans if rel == table}
        for table in ("engine_instance", "engine_deadletter", "engine_history")
    }
    assert on["engine_instance"] == {("Index Only Scan", "instance_unfinished")}
    assert on["engine_deadletter"] == {("Index Only Scan", "deadletter_open")}
    assert ("Index Only Scan", "history_parked") in on["engine_history"]
