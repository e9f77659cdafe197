"""The rollups against the ledger: every figure the DAG and costs pages show is checked against
an aggregate computed here in Python from the ledger rows, before and after the roller runs,
with new rows, late rows, steps that finish days after they started, and an operator's retry."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from dashboard import selectors as sel
from dashboard.charts import step_shape
from dashboard.models import CostDaily, CostHourly, InstanceCost, RollupState, StepDaily, StepHourly
from dashboard.rollups import hist
from dashboard.rollups.dirty import holes_from_json
from dashboard.rollups.reads import RollupView, rollup_view
from dashboard.rollups.services import rollup_catch_up
from ingest.engine.models import ApiCost, History, Step
from tests.dashboard.ledger_factories import make_instance
from tests.dashboard.rollup_ledger import (
    MINE,
    WORKFLOWS,
    add_cost,
    add_step,
    catch_up,
    history,
    hour_of,
    ledger,
)

pytestmark = pytest.mark.db


# ---- the same figures, computed here from the rows ----------------------------------------


@dataclass(frozen=True)
class Rows:
    """The ledger's steps (with their instances) and costs, read once for a whole comparison."""

    steps: list[Step]
    costs: list[ApiCost]


def ledger_rows() -> Rows:
    return Rows(list(Step.objects.select_related("instance")), list(ApiCost.objects.all()))


def expected_heat(rows: Rows, *, tenants: list[str], workflow: str, since: datetime) -> dict[str, dict[str, Any]]:
    by_name: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"n": 0, "in_flight": 0, "completed": 0, "errored": 0, "retried": 0, "attempts": 0, "ms": []}
    )
    for s in rows.steps:
        if s.instance.workflow != workflow or s.instance.tenant not in tenants or s.started_at < since:
            continue
        f = by_name[s.name]
        f["n"] += 1
        f["in_flight"] += s.status in ("running", "sleeping", "waiting")
        f["completed"] += s.status == "complete"
        f["errored"] += s.status == "errored"
        f["retried"] += s.attempts > 1
        f["attempts"] += s.attempts
        if s.status == "complete" and s.ended_at:
            f["ms"].append((s.ended_at - s.started_at).total_seconds() * 1000)
    nodes: dict[str, dict[str, Any]] = {}
    for name, f in by_name.items():
        node = nodes.setdefault(
            step_shape(name),
            {"n": 0, "in_flight": 0, "completed": 0, "errored": 0, "retried": 0, "attempts": 0, "p95s": []},
        )
        for k in ("n", "in_flight", "completed", "errored", "retried", "attempts"):
            node[k] += f[k]
        if f["ms"]:
            values = sorted(f["ms"])
            rank = (len(values) - 1) * 0.95
            lo, hi = int(rank), min(int(rank) + 1, len(values) - 1)
            node["p95s"].append(values[lo] + (values[hi] - values[lo]) * (rank - lo))
    costs = _cost_rows(rows, tenants=tenants, since=since, workflow_type=workflow, by="step_name")
    for name, total in costs.items():
        nodes.setdefault(step_shape(name), {"n": 0})["cost"] = nodes.get(step_shape(name), {}).get("cost", 0) + total
    return nodes


def _cost_rows(
    rows: Rows, *, tenants: list[str] | None, since: datetime, until: datetime | None = None, by: str, **equals: str
) -> dict[Any, Decimal]:
    out: dict[Any, Decimal] = defaultdict(Decimal)
    for c in rows.costs:
        if (
            c.created_at >= since
            and (tenants is None or c.tenant in tenants)
            and (until is None or c.created_at < until)
            and all(getattr(c, k) == v for k, v in equals.items())
        ):
            out[getattr(c, by)] += c.cost
    return out


def assert_heat_matches(rows: Rows, view: RollupView, *, tenants: list[str], workflow: str, since: datetime) -> None:
    got = sel.workflow_step_heat(tenants=tenants, name=workflow, since=since, view=view)
    want = expected_heat(rows, tenants=tenants, workflow=workflow, since=since)
    assert set(got) == set(want)
    for shape, w in want.items():
        g = got[shape]
        for k in ("n", "in_flight", "completed", "errored", "retried", "attempts"):
            assert g[k] == w.get(k, 0), (shape, k)
        assert g["cost"] == w.get("cost", 0), shape
        if w.get("p95s"):
            exact = max(w["p95s"]) / 1000
            assert abs(g["p95"] - exact) <= hist.RELATIVE_ERROR * exact + 0.0005, (shape, exact, g["p95"])
        else:
            assert g["p95"] is None


def assert_costs_match(
    ledger_now: Rows, view: RollupView, *, tenants: list[str], since: datetime, until: datetime | None = None
) -> None:
    f = sel.CostFilters(since=since, until=until)
    rows = [
        c
        for c in ledger_now.costs
        if c.tenant in tenants and c.created_at >= since and (until is None or c.created_at < until)
    ]
    total = sel.cost_total(tenants=tenants, filters=f, view=view)
    assert total == {"total": sum((c.cost for c in rows), Decimal(0)), "calls": len(rows)}
    for dim, column in sel.COST_DIMENSIONS.items():
        want = defaultdict(Decimal)
        for c in rows:
            want[getattr(c, column)] += c.cost
        got = {
            r["key"]: r["total"]
            for r in sel.cost_by_dimension(tenants=tenants, filters=f, by=dim, limit=100, view=view)
        }
        assert got == dict(want), dim
    for daily in (False, True):
        want = defaultdict(Decimal)
        for c in rows:
            bucket = timezone.localtime(hour_of(c.created_at))
            if daily:
                bucket = bucket.replace(hour=0)
            want[(bucket, step_shape(c.step_name))] += c.cost
        got = {
            (r["bucket"], r["key"]): r["total"]
            for r in sel.cost_series(tenants=tenants, filters=f, by="step", daily=daily, view=view)
        }
        assert got == dict(want), daily
    per_instance: dict[str, Decimal] = defaultdict(Decimal)
    for c in rows:
        if c.instance_id:
            per_instance[c.instance_id] += c.cost
    top = sorted(per_instance.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    got_top = [
        (r["instance_id"], r["total"]) for r in sel.cost_by_instance(tenants=tenants, filters=f, limit=10, view=view)
    ]
    assert got_top == top
    choices = sel.cost_filter_choices(tenants=tenants, since=since, view=view)
    assert choices["service"] == sorted({c.service for c in rows})
    assert choices["tenant"] == sorted({c.tenant for c in rows})


def assert_everything_matches(now: datetime) -> None:
    """Every figure against the ledger. The ledger is read once, and the roller's state once, as
    a page reads it once for all its figures: nothing changes in between."""
    rows, view = ledger_rows(), rollup_view()
    for tenants in (MINE, ["initech"]):
        for hours in (3, 24, 49):
            since = now - timedelta(hours=hours, minutes=17)
            for workflow in WORKFLOWS:
                assert_heat_matches(rows, view, tenants=tenants, workflow=workflow, since=since)
            assert_costs_match(rows, view, tenants=tenants, since=since)
        assert_costs_match(
            rows,
            view,
            tenants=tenants,
            since=now - timedelta(hours=40, minutes=30),
            until=now - timedelta(hours=2, minutes=10),
        )


# ---- the tests -----------------------------------------------------------------------------


def test_the_rollups_give_the_ledgers_own_figures_including_the_hour_not_closed_yet(db):
    now = timezone.now()
    ledger(now)
    assert_everything_matches(now)  # no rollup yet: all from the ledger
    catch_up(now)
    state = RollupState.objects.get()
    assert state.closed_until == hour_of(now) and state.instances_built
    # The rollups now hold every closed hour; the live tail still has rows of its own.
    assert StepHourly.objects.exists() and CostHourly.objects.exists() and StepDaily.objects.exists()
    assert CostDaily.objects.exists() and InstanceCost.objects.exists()
    assert Step.objects.filter(started_at__gte=hour_of(now)).exists()
    rolled = sum(StepHourly.objects.values_list("n", flat=True))
    assert rolled == Step.objects.filter(started_at__lt=hour_of(now)).count()
    assert_everything_matches(now)


def test_new_rows_count_at_once_and_the_next_pass_folds_them_in(db):
    now = timezone.now()
    ledger(now, n=30)
    catch_up(now)
    inst = make_instance("rl-new", tenant="acme", workflow="gong-ingest", created_at=now - timedelta(hours=5))
    old_hour = hour_of(now - timedelta(hours=5))
    before = StepHourly.objects.filter(
        hour=old_hour, tenant="acme", workflow="gong-ingest", step_name="llm-extract"
    ).first()
    add_step(inst, "llm-extract", started=now - timedelta(hours=5), ms=1234, logged=True)
    add_step(inst, "fetch-calls", started=now - timedelta(minutes=1), status="running", logged=True)
    add_cost(inst, at=now - timedelta(hours=5), amount="0.500000", logged=True)
    view = rollup_view()
    assert old_hour in view.dirty.step_hours and old_hour in view.dirty.cost_hours
    assert_everything_matches(now)  # read from the ledger for the dirtied hours
    result = rollup_catch_up(now=now)
    assert result.history_rows >= 3 and result.hours_recomputed >= 1
    after = StepHourly.objects.get(hour=old_hour, tenant="acme", workflow="gong-ingest", step_name="llm-extract")
    assert after.n == (before.n if before else 0) + 1
    assert InstanceCost.objects.get(instance_id="rl-new").total == Decimal("0.5")
    assert not rollup_view().dirty.step_hours
    assert_everything_matches(now)


def test_a_step_that_finishes_two_days_after_it_started_moves_from_in_flight_to_completed(db):
    now = timezone.now()
    ledger(now, n=10)
    inst = make_instance("rl-sleeper", tenant="globex", workflow="crm-enrich", created_at=now - timedelta(hours=48))
    step = add_step(inst, "embed", started=now - timedelta(hours=47, minutes=50), status="running")
    catch_up(now)
    heat = sel.workflow_step_heat(tenants=MINE, name="crm-enrich", since=now - timedelta(hours=49))
    in_flight = heat["embed"]["in_flight"]
    Step.objects.filter(id=step.id).update(status="complete", ended_at=now - timedelta(minutes=1))
    history(inst, "step.completed", now - timedelta(minutes=1))
    heat = sel.workflow_step_heat(tenants=MINE, name="crm-enrich", since=now - timedelta(hours=49))
    assert heat["embed"]["in_flight"] == in_flight - 1
    assert_everything_matches(now)
    catch_up(now)
    assert_everything_matches(now)


def test_a_row_committed_late_below_the_cursor_is_found_through_the_hole_it_left(db, require_postgres):
    # PostgreSQL's sequences hand out ids outside transactions, so a rolled-back or late
    # transaction leaves a hole below the cursor. SQLite's writers are serialised and a rolled-back
    # id is handed out again: no hole to find there.
    now = timezone.now()
    ledger(now, n=20)
    inst = make_instance("rl-late", tenant="acme", workflow="gong-ingest", created_at=now - timedelta(hours=30))
    with transaction.atomic():  # transactions that rolled back: ids no row will ever fill
        rolled_back = [history(inst, "step.started", now - timedelta(hours=29)).id for _ in range(300)]
        transaction.set_rollback(True)
    # A transaction takes history id k, another commits k+1; the roller passes in between. The
    # row written and deleted here is that first transaction's id, not yet visible.
    uncommitted = history(inst, "instance.status", now - timedelta(hours=29))
    history(inst, "instance.status", now - timedelta(hours=29))
    late_id = uncommitted.id
    uncommitted.delete()
    catch_up(now)
    gaps = RollupState.objects.get().gaps
    assert {late_id, *rolled_back} <= set(holes_from_json(gaps))
    assert len(gaps) == 1  # one run of ids, not a key per id for every page to read
    # The first transaction commits now: a step and a cost in an hour closed a day ago.
    started = now - timedelta(hours=29)
    add_step(inst, "llm-extract", started=started, ms=2500)
    add_cost(inst, at=started, amount="0.750000")
    History.objects.create(
        id=late_id, instance=inst, workflow=inst.workflow, tenant=inst.tenant, kind="cost.recorded", created_at=started
    )
    assert hour_of(started) in rollup_view().dirty.step_hours
    assert_everything_matches(now)
    catch_up(now)
    assert late_id not in holes_from_json(RollupState.objects.get().gaps)
    assert not rollup_view().dirty.cost_hours
    assert_everything_matches(now)


def test_late_rows_stamped_in_a_closed_hour_are_recomputed_there(db):
    now = timezone.now()
    ledger(now, n=20)
    catch_up(now)
    inst = make_instance("rl-skewed", tenant="default", workflow="crm-enrich", created_at=now - timedelta(hours=20))
    # A worker whose transaction began 20 hours ago (or whose clock is that far behind).
    add_step(inst, "persist-facts-2", started=now - timedelta(hours=20), ms=90, logged=True)
    add_cost(
        inst, at=now - timedelta(hours=20), amount="0.010000", step="persist-facts-2", service="postgres", logged=True
    )
    assert_everything_matches(now)
    catch_up(now)
    assert StepHourly.objects.filter(
        hour=hour_of(now - timedelta(hours=20)), step_name="persist-facts-2", tenant="default"
    ).exists()
    assert_everything_matches(now)


def test_an_operator_retry_that_deletes_a_failed_step_is_reflected(db):
    now = timezone.now()
    ledger(now, n=15)
    inst = make_instance("rl-retried", tenant="acme", workflow="gong-ingest", created_at=now - timedelta(hours=26))
    history(inst, "instance.created", now - timedelta(hours=26))
    add_step(inst, "fetch-calls", started=now - timedelta(hours=26), ms=300, position=1)
    # Two hours after the first step: once deleted, no step of the instance is left in its hour.
    failed = add_step(inst, "llm-extract", started=now - timedelta(hours=24), status="errored", attempts=6, position=2)
    history(inst, "step.failed", now - timedelta(hours=24))
    catch_up(now)
    errored = sel.workflow_step_heat(tenants=MINE, name="gong-ingest", since=now - timedelta(hours=30))
    failed.delete()  # instance_retry deletes the failed step and logs the operator's action
    history(inst, "operator", now, action="retry")
    heat = sel.workflow_step_heat(tenants=MINE, name="gong-ingest", since=now - timedelta(hours=30))
    assert heat["llm-extract"]["errored"] == errored["llm-extract"]["errored"] - 1
    assert_everything_matches(now)
    catch_up(now)
    assert_everything_matches(now)


def test_spend_that_straddles_the_window_counts_only_inside_it(db):
    now = timezone.now()
    ledger(now, n=5)
    catch_up(now)
    rows = sel.cost_by_instance(tenants=MINE, filters=sel.CostFilters(since=now - timedelta(hours=10)), limit=50)
    long = next(r for r in rows if r["instance_id"] == "rl-long")
    assert long["total"] == Decimal("2") and long["calls"] == 1  # not its lifetime 3.00 in 2 calls
    rows = sel.cost_by_instance(tenants=MINE, filters=sel.CostFilters(since=now - timedelta(hours=46)), limit=50)
    assert next(r for r in rows if r["instance_id"] == "rl-long")["total"] == Decimal("3")


def expected_top(*, tenants: list[str], since: datetime, order: str, limit: int, **equals: str) -> list[tuple]:
    per: dict[str, dict[str, Any]] = {}
    for c in ApiCost.objects.filter(tenant__in=tenants, created_at__gte=since, instance__isnull=False, **equals):
        r = per.setdefault(c.instance_id, {"total": Decimal(0), "calls": 0, "last": c.created_at})
        r["total"] += c.cost
        r["calls"] += 1
        r["last"] = max(r["last"], c.created_at)
    field = order.lstrip("-")
    ranked = sorted(per.items(), key=lambda kv: kv[0])
    if order == "-calls":  # equal calls: the latest spend first
        ranked.sort(key=lambda kv: kv[1]["last"], reverse=True)
    ranked.sort(key=lambda kv: kv[1][field], reverse=order.startswith("-"))
    return [(i, r[field]) for i, r in ranked[:limit]]


def test_the_top_instances_by_every_sort_and_filter_are_the_ledgers(db):
    now = timezone.now()
    ledger(now, n=60)
    catch_up(now)
    since = now - timedelta(hours=30)
    for equals in (
        {},
        {"tenant": "globex"},
        {"workflow": "crm-enrich"},
        {"service": "openai"},
        {"model": "gpt-4o-mini"},
        {"step": "embed"},
    ):
        f = sel.CostFilters(since=since, **equals)
        for order in ("-total", "-calls", "-last", "total"):
            got = sel.cost_by_instance(tenants=MINE, filters=f, sort=order, limit=7)
            field = order.lstrip("-")
            want = expected_top(
                tenants=MINE,
                since=since,
                order=order,
                limit=7,
                **{sel.COST_DIMENSIONS[k]: v for k, v in equals.items()},
            )
            assert [(r["instance_id"], r[field]) for r in got] == want, (equals, order)


def test_each_user_sees_only_their_tenants_figures_from_the_rollups(operator, stranger):
    now = timezone.now()
    ledger(now)
    catch_up(now)
    page = operator.get("/costs/?window=7d").context
    mine = ApiCost.objects.filter(tenant__in=MINE)
    assert page["total"] == {"total": sum(c.cost for c in mine), "calls": mine.count()}
    assert "initech" not in page["choices"]["tenant"]
    page = stranger.get("/costs/?window=7d").context
    theirs = ApiCost.objects.filter(tenant="initech")
    assert page["total"] == {"total": sum(c.cost for c in theirs), "calls": theirs.count()}
    assert {r["tenant"] for r in page["instances"]} <= {"initech"}
    dag = operator.get("/workflows/gong-ingest/?window=7d").context
    want = Step.objects.filter(instance__workflow="gong-ingest", instance__tenant__in=MINE).count()
    assert sum(n["heat"]["n"] for n in dag["nodes"]) == want


def test_the_command_catches_up_and_a_rebuild_starts_over(db):
    now = timezone.now()
    ledger(now, n=10)
    call_command("rollup", "--once")
    assert RollupState.objects.get().closed_until == hour_of(timezone.now())
    rolled = StepHourly.objects.count()
    assert rolled
    call_command("rollup", "--once", "--rebuild")
    assert StepHourly.objects.count() == rolled
    assert_everything_matches(now)


@pytest.mark.postgres
def test_a_second_roller_skips_its_pass_while_another_holds_the_lock(db, require_postgres):
    import psycopg

    from dashboard.rollups.runner import LOCK_KEY, rollup_pass_if_leader

    params = connection.get_connection_params()
    keep = {k: v for k, v in params.items() if k in {"dbname", "user", "password", "host", "port"}}
    with psycopg.connect(**keep, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])
        assert rollup_pass_if_leader(now=timezone.now()) is None
        other.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])
    assert rollup_pass_if_leader(now=timezone.now()) is not None
