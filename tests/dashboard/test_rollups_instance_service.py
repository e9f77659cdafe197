"""The costs page's per-instance table under a service, step or model filter, read from the
per-instance rollup split by it (plus the ledger for instances straddling an edge or changed since
the roller's cursor), against rankings computed here in Python from the api_costs rows."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db.models import Sum
from django.utils import timezone

from dashboard import selectors as sel
from dashboard.models import InstanceModelCost, InstanceServiceCost, InstanceStepCost
from dashboard.rollups.reads import rollup_view
from dashboard.rollups.services import rollup_catch_up
from ingest.engine.models import ApiCost
from tests.dashboard.ledger_factories import make_instance
from tests.dashboard.rollup_ledger import MINE, add_cost, catch_up, ledger

pytestmark = pytest.mark.db

SPLITS = [
    {"service": "openai"},
    {"service": "postgres"},
    {"service": "gong"},
    {"service": "slack"},
    {"step": "persist-facts-1"},
    {"step": "llm-extract"},
    {"step": "fetch-calls"},
    {"model": "gpt-4o-mini"},
    {"model": "text-embedding-3-small"},
    {"service": "openai", "model": "gpt-4o-mini"},
    {"service": "postgres", "step": "persist-facts-2"},
    {"service": "openai", "step": "llm-extract"},
    {"step": "llm-extract", "model": "gpt-4o-mini"},
]
ORDERS = ("-total", "-calls", "-last", "total")


def expected(
    rows: list[ApiCost],
    *,
    tenants: list[str],
    since: datetime,
    until: datetime | None,
    order: str,
    limit: int,
    **equals: str,
) -> list[tuple[str, Any]]:
    per: dict[str, dict[str, Any]] = {}
    for c in rows:
        if (
            c.tenant not in tenants
            or c.created_at < since
            or (until is not None and c.created_at >= until)
            or any(getattr(c, k) != v for k, v in equals.items())
        ):
            continue
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


def assert_matches(now: datetime, *, limit: int = 7) -> int:
    """Every service/step/model split with every window and every tenant or workflow filter, which
    choose the rows, the rollup and the instances read from the ledger; each of them ranked by one
    sort, the sorts taking turns so that each meets every split, every window and every filter
    (a sort only orders the rows they chose). How many comparisons had rows.

    The ledger is read once, and the roller's state once, as the costs page reads it once for all
    its figures: nothing changes in between."""
    rows, view = list(ApiCost.objects.filter(instance__isnull=False)), rollup_view()
    compared = 0
    windows = [
        (now - timedelta(hours=30), None),
        (now - timedelta(hours=10), None),
        (now - timedelta(hours=40), now - timedelta(hours=4)),
        (now - timedelta(hours=60), None),
    ]
    extras = [{}, {"tenant": "globex"}, {"workflow": "crm-enrich"}, {"tenant": "initech"}]
    for i, part in enumerate(SPLITS):
        for j, (since, until) in enumerate(windows):
            for k, extra in enumerate(extras):
                order = ORDERS[(i + j + k) % len(ORDERS)]
                f = sel.CostFilters(since=since, until=until, **part, **extra)
                got = sel.cost_by_instance(tenants=MINE, filters=f, sort=order, limit=limit, view=view)
                field = order.lstrip("-")
                equals = {sel.COST_DIMENSIONS[name]: v for name, v in {**part, **extra}.items() if name != "tenant"}
                tenants = [t for t in MINE if t == extra.get("tenant", t)]
                want = expected(rows, tenants=tenants, since=since, until=until, order=order, limit=limit, **equals)
                assert [(r["instance_id"], r[field]) for r in got] == want, (part, since, until, extra, order)
                assert all(r["tenant"] in MINE for r in got)
                compared += bool(want)
    return compared


def test_the_filtered_top_instances_are_the_ledgers(db):
    now = timezone.now()
    ledger(now, n=60)
    catch_up(now)
    view = rollup_view()
    assert view.usable and view.instances_built
    assert InstanceServiceCost.objects.filter(service="postgres").exists()
    assert InstanceStepCost.objects.filter(step_name="persist-facts-1").exists()
    assert InstanceModelCost.objects.filter(model="gpt-4o-mini").exists()
    assert not InstanceModelCost.objects.filter(model="").exists()
    assert assert_matches(now) > 100  # of 208: most comparisons rank rows, few an empty list


@pytest.mark.parametrize(
    ("name", "model", "column", "value"),
    [
        ("service", InstanceServiceCost, "service", "openai"),
        ("step", InstanceStepCost, "step_name", "llm-extract"),
        ("model", InstanceModelCost, "model", "gpt-4o-mini"),
    ],
)
def test_a_filter_by_service_step_or_model_reads_its_rollup(db, name, model, column, value):
    """The rows above come from the rollups, not the ledger: a wrong rollup row shows."""
    now = timezone.now()
    ledger(now, n=30)
    catch_up(now)
    f = sel.CostFilters(since=now - timedelta(hours=60), **{name: value})
    top = sel.cost_by_instance(tenants=MINE, filters=f, limit=3)[0]
    model.objects.filter(instance_id=top["instance_id"], **{column: value}).update(total=Decimal("99"))
    assert sel.cost_by_instance(tenants=MINE, filters=f, limit=3)[0]["total"] == Decimal("99")


def test_two_filters_one_implying_the_other_read_its_rollup(db):
    """In this ledger openai is only called with gpt-4o-mini: service=openai with model=gpt-4o-mini
    reads one of their rollups."""
    now = timezone.now()
    ledger(now, n=30)
    catch_up(now)
    f = sel.CostFilters(since=now - timedelta(hours=60), service="openai", model="gpt-4o-mini")
    top = sel.cost_by_instance(tenants=MINE, filters=f, limit=3)[0]
    InstanceModelCost.objects.filter(instance_id=top["instance_id"], model="gpt-4o-mini").update(total=Decimal("99"))
    InstanceServiceCost.objects.filter(instance_id=top["instance_id"], service="openai").update(total=Decimal("99"))
    assert sel.cost_by_instance(tenants=MINE, filters=f, limit=3)[0]["total"] == Decimal("99")


def test_a_service_span_inside_the_window_of_an_instance_straddling_it_counts_once(db):
    now = timezone.now()
    ledger(now, n=5)
    inst = make_instance("rl-two", tenant="acme", created_at=now - timedelta(hours=20))
    add_cost(inst, at=now - timedelta(hours=20), amount="1.000000", service="gong", step="fetch-calls")
    add_cost(inst, at=now - timedelta(hours=5), amount="2.000000", service="openai", step="llm-extract")
    add_cost(inst, at=now - timedelta(hours=4), amount="3.000000", service="openai", step="llm-extract")
    # Neither filter implies the other any more: service=openai with step=llm-extract from the ledger.
    add_cost(inst, at=now - timedelta(hours=4), amount="0.700000", service="anthropic", step="llm-extract")
    add_cost(inst, at=now - timedelta(hours=4), amount="0.900000", service="openai", step="classify")
    mix = make_instance("rl-mix", tenant="acme", created_at=now - timedelta(hours=8))
    for service, step, amount in [
        ("openai", "llm-extract", "1.000000"),
        ("anthropic", "llm-extract", "0.700000"),
        ("openai", "classify", "0.900000"),
    ]:
        add_cost(mix, at=now - timedelta(hours=8), amount=amount, service=service, step=step)
    catch_up(now)
    f = sel.CostFilters(since=now - timedelta(hours=10), service="openai", step="llm-extract")
    row = next(r for r in sel.cost_by_instance(tenants=MINE, filters=f, limit=50) if r["instance_id"] == "rl-mix")
    assert (row["total"], row["calls"]) == (Decimal("1"), 1)
    f = sel.CostFilters(since=now - timedelta(hours=10), service="openai")
    row = next(r for r in sel.cost_by_instance(tenants=MINE, filters=f, limit=50) if r["instance_id"] == "rl-two")
    assert (row["total"], row["calls"]) == (Decimal("5.9"), 3)
    f = sel.CostFilters(since=now - timedelta(hours=10), until=now - timedelta(hours=4, minutes=30), service="openai")
    row = next(r for r in sel.cost_by_instance(tenants=MINE, filters=f, limit=50) if r["instance_id"] == "rl-two")
    assert (row["total"], row["calls"]) == (Decimal("2"), 1)
    f = sel.CostFilters(since=now - timedelta(hours=10), service="openai", step="llm-extract")
    row = next(r for r in sel.cost_by_instance(tenants=MINE, filters=f, limit=50) if r["instance_id"] == "rl-two")
    assert (row["total"], row["calls"]) == (Decimal("5"), 2)
    assert assert_matches(now) > 0


def test_spend_recorded_after_the_roller_ran_counts_at_once_and_after_the_next_pass(db):
    now = timezone.now()
    ledger(now, n=30)
    catch_up(now)
    old = ApiCost.objects.filter(service="openai", instance__isnull=False).order_by("created_at").first()
    assert old is not None
    inst = old.instance
    add_cost(
        inst,
        at=old.created_at + timedelta(minutes=1),
        amount="5.000000",
        service="openai",
        step="llm-extract",
        logged=True,
    )
    add_cost(inst, at=old.created_at + timedelta(minutes=2), amount="0.500000", service="slack", logged=True)
    assert inst.id in rollup_view().dirty.cost_instances
    assert assert_matches(now) > 0  # the changed instance from the ledger
    rollup_catch_up(now=now)
    assert not rollup_view().dirty.cost_instances
    rolled = InstanceServiceCost.objects.get(instance_id=inst.id, service="slack")
    assert rolled.total == Decimal("0.5") and rolled.calls == 1
    step = InstanceStepCost.objects.get(instance_id=inst.id, step_name="llm-extract")
    assert step.total == ApiCost.objects.filter(instance=inst, step_name="llm-extract").aggregate(t=Sum("cost"))["t"]
    assert assert_matches(now) > 0
