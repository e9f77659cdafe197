"""The overview's figures from the instance rollups against the ledger: instances by status (live
ones all, finished ones created in the window), finished per hour, steps in flight, each checked
against a count made here in Python from the ledger rows, before and after the roller runs, after
status changes the roller has not seen yet, a retry that moves an instance out of its ended hour,
a late commit below the cursor, a retention purge, and a roller pass in the middle of a read."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from dashboard import selectors as sel
from dashboard.models import (
    InstanceDaily,
    InstanceEndedHourly,
    InstanceHourly,
    InstanceState,
    RollupState,
)
from dashboard.rollups import instance_reads
from dashboard.rollups.dirty import holes_from_json
from dashboard.rollups.services import rollup_catch_up
from ingest.engine.models import FINISHED_STATUSES, History, Instance, RetentionBatch, Status, Step
from tests.dashboard.ledger_factories import make_instance

pytestmark = pytest.mark.db

MINE = ["acme", "default", "globex"]
THROUGHPUT = {"complete", "completed_with_errors", "errored"}
IN_FLIGHT = {"running", "waitingForPause"}


def hour_of(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def history(inst: Instance, kind: str, at: datetime, **fields: Any) -> History:
    return History.objects.create(
        instance=inst, workflow=inst.workflow, tenant=inst.tenant, kind=kind, created_at=at, **fields
    )


def set_status(
    inst: Instance, status: str, at: datetime, *, ended: bool | None = None, kind: str = "instance.status"
) -> None:
    """What the engine does: the row and a history row of the instance, in one go."""
    finished = status in FINISHED_STATUSES if ended is None else ended
    Instance.objects.filter(id=inst.id).update(status=status, ended_at=at if finished else None, updated_at=at)
    history(inst, kind, at, status=status)


def ledger(now: datetime, *, seed: int = 3, n: int = 90) -> None:
    """Instances created over the last ten days (the newest in the current hour), every status,
    four tenants (one not the operator's), running steps in running, paused and waitingForPause
    instances, and finished ones that ended seconds to hours after they were created."""
    rng = random.Random(seed)
    statuses = [*Status.values, "complete", "complete", "errored"]
    for k in range(n):
        created = now - timedelta(minutes=rng.randint(1, 10 * 24 * 60))
        status = rng.choice(statuses)
        ended = None
        if status in FINISHED_STATUSES:
            ended = min(now - timedelta(seconds=5), created + timedelta(minutes=rng.choice([1, 30, 200, 2000])))
        inst = make_instance(
            f"ic-{seed}-{k}",
            tenant=rng.choice(["acme", "acme", "globex", "default", "initech"]),
            workflow=rng.choice(["gong-ingest", "crm-enrich"]),
            status=status,
            created_at=created,
            ended_at=ended,
        )
        for p in range(rng.randint(0, 3)):
            running = status in ("running", "paused", "waitingForPause") and p == 0
            Step.objects.create(
                instance=inst,
                name=f"s{p}",
                seq=1,
                position=p + 1,
                status="running" if running else "complete",
                started_at=created,
                ended_at=None if running else created + timedelta(seconds=2),
            )


def expected(
    rows: tuple[list[Instance], list[Step]], *, tenants: list[str], since: datetime
) -> tuple[dict[str, int], Counter[tuple[datetime, str]], int]:
    instances, running_steps = rows
    counts = {s: 0 for s in Status.values}
    ended: Counter[tuple[datetime, str]] = Counter()
    for i in instances:
        if i.tenant not in tenants:
            continue
        if i.status not in FINISHED_STATUSES or i.created_at >= since:
            counts[i.status] += 1
        if i.status in THROUGHPUT and i.ended_at is not None and i.ended_at >= since:
            ended[(hour_of(i.ended_at), i.status)] += 1
    running = sum(1 for s in running_steps if s.instance.status in IN_FLIGHT and s.instance.tenant in tenants)
    return counts, ended, running


def ledger_rows() -> tuple[list[Instance], list[Step]]:
    """The instances and running steps, read once for every comparison of a pass."""
    return list(Instance.objects.all()), list(Step.objects.filter(status="running").select_related("instance"))


def shown(*, tenants: list[str], since: datetime) -> tuple[dict[str, int], Counter[tuple[datetime, str]], int]:
    got = sel.overview_figures(tenants=tenants, since=since)
    column = {"complete": "complete", "with_errors": "completed_with_errors", "errored": "errored"}
    ended: Counter[tuple[datetime, str]] = Counter()
    for row in got.throughput:
        for key, status in column.items():
            if row[key]:  # type: ignore[literal-required]
                ended[(hour_of(row["bucket"]), status)] += row[key]  # type: ignore[literal-required]
    return got.counts, ended, got.in_flight_count


def assert_matches(now: datetime, *, rolled: bool = True) -> None:
    rows = ledger_rows()
    for tenants in (MINE, ["acme"], ["initech"]):
        for since in (
            now - timedelta(hours=24),
            now - timedelta(days=7),
            hour_of(now) - timedelta(hours=30),
            now - timedelta(days=3, minutes=17),
        ):
            assert shown(tenants=tenants, since=since) == expected(rows, tenants=tenants, since=since), (tenants, since)
            served = instance_reads.overview_counts(tenants=tenants, since=since)
            assert (served is not None) == rolled  # the figures came from the rollups (or the ledger)


def catch_up(now: datetime) -> None:
    while not rollup_catch_up(now=now, max_hours=24 * 12).caught_up:
        pass


# ---- the tests -----------------------------------------------------------------------------


def test_the_overview_figures_are_the_ledgers_before_and_after_the_roller(db):
    now = timezone.now()
    ledger(now)
    assert_matches(now, rolled=False)  # no rollup yet: counted from the ledger
    catch_up(now)
    assert RollupState.objects.get().instance_counts_built
    assert InstanceState.objects.count() == Instance.objects.count()
    assert sum(InstanceHourly.objects.values_list("n", flat=True)) == Instance.objects.count()
    assert sum(InstanceDaily.objects.values_list("n", flat=True)) == Instance.objects.count()
    assert (
        sum(InstanceEndedHourly.objects.values_list("n", flat=True)) == Instance.objects.exclude(ended_at=None).count()
    )
    assert_matches(now)


def test_status_changes_count_at_once_and_the_next_pass_folds_them_in(db):
    now = timezone.now()
    ledger(now)
    catch_up(now)
    # Days-old instances change now: their creation day's counts move, and they end in this hour.
    old = make_instance("ic-old", tenant="acme", status="waiting", created_at=now - timedelta(days=5, hours=3))
    fresh = make_instance("ic-fresh", tenant="globex", status="queued", created_at=now - timedelta(minutes=3))
    history(fresh, "instance.created", now - timedelta(minutes=3))
    history(old, "step.started", now - timedelta(minutes=3))
    catch_up(now)
    assert InstanceState.objects.get(instance_id="ic-old").status == "waiting"
    set_status(old, "errored", now - timedelta(seconds=30))
    set_status(fresh, "running", now - timedelta(seconds=20))
    Step.objects.create(instance=fresh, name="fetch", seq=1, position=1, status="running", started_at=now)
    history(fresh, "step.started", now - timedelta(seconds=19))
    new = make_instance("ic-new", tenant="default", status="queued", created_at=now - timedelta(seconds=10))
    history(new, "instance.created", now - timedelta(seconds=10))
    assert_matches(now)  # the rollups as of the cursor, corrected by the changed instances

    def errored_by_day() -> dict[Any, int]:
        return dict(
            InstanceDaily.objects.filter(tenant="acme", workflow="gong-ingest", status="errored").values_list(
                "day", "n"
            )
        )

    before = errored_by_day()
    catch_up(now)
    assert InstanceState.objects.get(instance_id="ic-old").status == "errored"
    assert InstanceState.objects.get(instance_id="ic-fresh").running_steps == 1
    after = errored_by_day()
    assert sum(after.values()) == sum(before.values()) + 1
    assert_matches(now)


def test_a_retried_instance_leaves_the_hour_it_had_ended_in(db):
    now = timezone.now()
    ledger(now, n=30)
    inst = make_instance(
        "ic-retry",
        tenant="acme",
        status="errored",
        created_at=now - timedelta(hours=6),
        ended_at=now - timedelta(hours=5, minutes=40),
    )
    catch_up(now)
    ended_hour = hour_of(now - timedelta(hours=5, minutes=40))
    assert (
        InstanceEndedHourly.objects.get(hour=ended_hour, tenant="acme", workflow="gong-ingest", status="errored").n >= 1
    )
    set_status(inst, "running", now - timedelta(minutes=2), kind="operator")  # retry: no longer ended
    assert_matches(now)
    catch_up(now)
    rolled = InstanceEndedHourly.objects.filter(
        hour=ended_hour, tenant="acme", workflow="gong-ingest", status="errored"
    )
    assert sum(r.n for r in rolled) == sum(
        1
        for i in Instance.objects.filter(tenant="acme", workflow="gong-ingest", status="errored")
        if i.ended_at and hour_of(i.ended_at) == ended_hour
    )
    assert_matches(now)
    set_status(inst, "complete", now - timedelta(seconds=5))
    assert_matches(now)
    catch_up(now)
    assert_matches(now)


def test_a_change_committed_late_below_the_cursor_is_found_through_the_hole_it_left(db):
    now = timezone.now()
    ledger(now, n=30)
    inst = make_instance("ic-late", tenant="acme", status="running", created_at=now - timedelta(days=2))
    # A transaction takes history id k, another commits k+1; the roller passes in between.
    uncommitted = history(inst, "instance.status", now - timedelta(minutes=3))
    history(inst, "step.started", now - timedelta(minutes=3))
    late_id = uncommitted.id
    uncommitted.delete()
    catch_up(now)
    assert late_id in holes_from_json(RollupState.objects.get().gaps)
    # The first transaction commits now: the instance completed.
    Instance.objects.filter(id=inst.id).update(status="complete", ended_at=now - timedelta(minutes=2))
    History.objects.create(
        id=late_id,
        instance=inst,
        workflow=inst.workflow,
        tenant=inst.tenant,
        kind="instance.status",
        status="complete",
        created_at=now - timedelta(minutes=2),
    )
    assert_matches(now)
    catch_up(now)
    assert InstanceState.objects.get(instance_id="ic-late").status == "complete"
    assert_matches(now)


def test_instances_a_retention_batch_deleted_stop_counting(db):
    now = timezone.now()
    ledger(now, n=40)
    catch_up(now)
    cutoff = now - timedelta(hours=2)
    gone = list(Instance.objects.filter(workflow="gong-ingest", ended_at__lt=cutoff).values_list("id", flat=True))
    assert gone
    # What retention_purge_batch does: no history row is left to follow, only the batch's row.
    History.objects.filter(instance_id__in=gone).delete()
    Instance.objects.filter(id__in=gone).delete()
    RetentionBatch.objects.create(workflow="gong-ingest", ran_at=now, cutoff=cutoff, purged=len(gone), archive="x")
    assert_matches(now)
    catch_up(now)
    assert not InstanceState.objects.filter(instance_id__in=gone).exists()
    assert_matches(now)


def test_a_pass_that_commits_in_the_middle_of_a_read_makes_it_read_again(db, monkeypatch):
    now = timezone.now()
    ledger(now, n=40)
    inst = make_instance("ic-race", tenant="acme", status="running", created_at=now - timedelta(hours=3))
    catch_up(now)
    set_status(inst, "complete", now - timedelta(seconds=3))
    read = instance_reads._from_rollups
    passes = []

    def read_then_a_pass(**kwargs: Any) -> Any:
        got = read(**kwargs)
        if not passes:  # the roller folds the change in after the rollups were read
            passes.append(rollup_catch_up(now=now))
        return got

    monkeypatch.setattr(instance_reads, "_from_rollups", read_then_a_pass)
    since = now - timedelta(hours=24)
    assert shown(tenants=MINE, since=since) == expected(ledger_rows(), tenants=MINE, since=since)
    assert passes
