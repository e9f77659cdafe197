"""The costs page's tables: spend per day by workflow and step, and the p50/p90/p99 of what one
run spent per workflow, each equal to the same figures computed from the ledger's own rows,
before the roller ran (ledger only) and after (rollups and ledger merged)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from dashboard import selectors as sel
from dashboard.charts import step_shape
from dashboard.rollups import days
from dashboard.rollups.reads import money, rollup_view
from dashboard.selectors.cost_tables import cost_by_day, cost_run_percentiles, percentile_cont
from ingest.engine.models import ApiCost
from tests.dashboard.rollup_ledger import MINE, catch_up, ledger

pytestmark = pytest.mark.db


@pytest.mark.pure
def test_percentile_cont_interpolates_between_the_nearest_ranks_as_postgresql_does():
    assert percentile_cont([1.0], 0.99) == 1.0
    assert percentile_cont([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile_cont([0.0, 10.0], 0.9) == pytest.approx(9.0)


def _rows(f: sel.CostFilters, tenants: list[str]) -> list[ApiCost]:
    return [
        c
        for c in ApiCost.objects.all()
        if c.tenant in tenants
        and c.created_at >= f.since
        and (f.until is None or c.created_at < f.until)
        and (not f.workflow or c.workflow_type == f.workflow)
        and (not f.service or c.service == f.service)
    ]


def expected_days(f: sel.CostFilters, tenants: list[str]) -> dict[tuple[Any, str, str], tuple[int, Decimal]]:
    out: dict[tuple[Any, str, str], list[Any]] = defaultdict(lambda: [0, Decimal(0)])
    for c in _rows(f, tenants):
        key = (c.created_at.astimezone(days.zone()).date(), c.workflow_type, step_shape(c.step_name))
        out[key][0] += 1
        out[key][1] += c.cost
    return {k: (n, money(t)) for k, (n, t) in out.items()}


def expected_percentiles(f: sel.CostFilters, tenants: list[str]) -> dict[str, tuple[int, list[Decimal]]]:
    runs: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for c in _rows(f, tenants):
        if c.instance_id is not None:
            runs[(c.workflow_type, c.instance_id)] += c.cost
    by: dict[str, list[float]] = defaultdict(list)
    for (workflow, _), total in runs.items():
        by[workflow].append(float(total))
    return {w: (len(v), [money(percentile_cont(sorted(v), q)) for q in (0.5, 0.9, 0.99)]) for w, v in by.items()}


def _compare(now: datetime) -> int:
    view, compared = rollup_view(), 0
    for since, until in [(now - timedelta(hours=30), None), (now - timedelta(hours=60), now - timedelta(hours=5))]:
        for extra in ({}, {"workflow": "crm-enrich"}, {"tenant": "globex"}, {"service": "openai"}):
            f = sel.CostFilters(since=since, until=until, **extra)
            tenants = [t for t in MINE if t == extra.get("tenant", t)]
            got = cost_by_day(tenants=MINE, filters=f, view=view)
            assert {(r.day, r.workflow, r.step): (r.calls, r.total) for r in got.rows} == expected_days(f, tenants)
            assert got.left_out == 0
            assert [r.day for r in got.rows] == sorted((r.day for r in got.rows), reverse=True)
            pct = cost_run_percentiles(tenants=MINE, filters=f, view=view)
            assert {r.workflow: (r.runs, [r.p50, r.p90, r.p99]) for r in pct} == expected_percentiles(f, tenants), extra
            compared += bool(pct)
    return compared


def test_the_day_table_and_the_percentiles_are_the_ledgers_before_and_after_the_roller(db):
    now = timezone.now()
    ledger(now, n=40)
    assert _compare(now) >= 6
    catch_up(now)
    assert rollup_view().instances_built
    assert _compare(now) >= 6


def test_the_day_table_says_how_many_rows_it_left_out(db):
    now = timezone.now()
    ledger(now, n=20)
    f = sel.CostFilters(since=now - timedelta(hours=60))
    full = cost_by_day(tenants=MINE, filters=f)
    cut = cost_by_day(tenants=MINE, filters=f, limit=3)
    assert len(cut.rows) == 3 and cut.left_out == len(full.rows) - 3 and cut.rows == full.rows[:3]


def test_the_costs_page_shows_both_tables_and_no_other_tenants_spend(operator, db):
    now = timezone.now()
    ledger(now, n=30)
    body = operator.get("/costs/?window=7d").content.decode()
    # The percentiles come in a request of their own, which the page makes once shown.
    assert 'id="cost-by-day"' in body and 'hx-get="/costs/?window=7d&amp;part=runs"' in body
    assert "initech" not in body
    body = operator.get("/costs/?window=7d&part=runs").content.decode()
    assert body.lstrip().startswith('<table class="data" id="run-percentiles">')
    assert operator.get("/costs/?window=7d&part=zzz").status_code == 400
    f = sel.CostFilters(since=now - timedelta(days=7))
    for workflow, (runs, _) in expected_percentiles(f, MINE).items():
        assert f'<td>{workflow}</td><td class="num">{runs}</td>' in body
    assert "initech" not in body
