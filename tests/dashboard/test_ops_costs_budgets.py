"""Costs (breakdowns, CSV export) and budgets (list, forecast, edit through budget_upsert)."""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from test_ops_factories import approval, budget, cost, make_instance, now, reservation

from dashboard.selectors import budget_forecast
from ingest.engine.models import Budget, History

pytestmark = pytest.mark.db


def _spend():
    a = make_instance(tenant="acme", created_at=now())
    g = make_instance(tenant="globex", created_at=now())
    i = make_instance(tenant="initech", created_at=now())
    cost(instance=a, service="openai", step="llm-extract", amount="0.120000", model="gpt-4o-mini")
    cost(instance=a, service="openai", step="persist-facts-1", amount="0.010000")
    cost(instance=a, service="openai", step="persist-facts-2", amount="0.020000")
    cost(instance=g, service="dataforseo", step="serp", amount="1.500000", model="")
    cost(instance=i, service="openai", step="llm-extract", amount="99.000000")
    return a, g, i


def test_costs_sum_in_the_database_per_dimension_within_my_tenants(operator, stranger):
    a, g, _ = _spend()
    r = operator.get("/costs/?window=24h&by=service")
    assert r.status_code == 200
    assert r.context["total"]["total"] == Decimal("1.65") and r.context["total"]["calls"] == 4
    by = {x["key"]: x["total"] for x in r.context["by_dimension"]}
    assert by == {"dataforseo": Decimal("1.5"), "openai": Decimal("0.15")}
    per = {x["instance_id"]: x["total"] for x in r.context["instances"]}
    assert per == {g.id: Decimal("1.5"), a.id: Decimal("0.15")}
    html = r.content.decode()
    assert "$1.65" in html and "Plotly.newPlot" in html and "treemap" in html
    assert "$99.00" not in html
    assert stranger.get("/costs/?window=24h").context["total"]["total"] == Decimal("99")


def test_the_treemap_merges_indexed_steps_under_service_and_workflow(viewer):
    _spend()
    r = viewer.get("/costs/?window=24h")
    html = r.content.decode()
    assert "openai\\u002fgong-ingest\\u002fpersist-facts-{i}" in html  # plotly escapes "/" in JSON
    assert "persist-facts-1" not in html


def test_filters_live_in_the_query_and_narrow_everything(viewer):
    _spend()
    r = viewer.get("/costs/?window=24h&service=openai&step=llm-extract")
    assert r.context["total"]["total"] == Decimal("0.12")
    assert 'href="/costs/export.csv?window=24h&amp;service=openai&amp;step=llm-extract"' in r.content.decode()


def test_csv_export_streams_the_filtered_rows_with_fixed_decimals(operator):
    a, g, _ = _spend()
    r = operator.get("/costs/export.csv?window=24h&service=openai")
    assert r.status_code == 200 and r.streaming
    assert r["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert rows[0][:4] == ["created_at", "tenant", "service", "model"]
    body = rows[1:]
    assert len(body) == 3  # openai in acme/globex/default; initech's and dataforseo left out
    cost_col = rows[0].index("cost")
    assert sorted(x[cost_col] for x in body) == ["0.010000", "0.020000", "0.120000"]
    assert all(x[1] == "acme" for x in body)


def test_the_stranger_exports_only_their_tenant(stranger):
    _spend()
    r = stranger.get("/costs/export.csv?window=24h")
    rows = list(csv.reader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert [x[1] for x in rows[1:]] == ["initech"]


@pytest.mark.pure
def test_forecast_is_linear_on_the_periods_spend_rate():
    start = datetime(2026, 3, 1, 0, 0)
    end = start + timedelta(days=1)
    # 6 hours in, 3.00 of 10.00 spent: 0.50/h, 7.00 left → runs out 14 h from now, inside the day
    f = budget_forecast(
        spent=Decimal("3"), limit=Decimal("10"), period_start=start, period_end=end, now=start + timedelta(hours=6)
    )
    assert f.rate_per_hour == Decimal("0.5")
    assert f.runs_out_at == start + timedelta(hours=20)
    assert f.state == "at-risk" and f.projected == Decimal("12") and f.used_pct == 30.0
    # slower: 1.00 in 6 h lasts the day (projected 4.00)
    f = budget_forecast(
        spent=Decimal("1"), limit=Decimal("10"), period_start=start, period_end=end, now=start + timedelta(hours=6)
    )
    assert f.state == "ok" and f.runs_out_at is None and f.projected == Decimal("4")
    # nothing spent: no rate, no run-out
    f = budget_forecast(spent=Decimal("0"), limit=Decimal("10"), period_start=start, period_end=end, now=start)
    assert f.state == "ok" and f.rate_per_hour == 0
    # over the limit: exhausted now
    f = budget_forecast(
        spent=Decimal("11"), limit=Decimal("10"), period_start=start, period_end=end, now=start + timedelta(hours=2)
    )
    assert f.state == "exhausted" and f.remaining == Decimal("-1") and f.bar_pct == 100.0


def test_budgets_page_lists_my_budgets_reservations_and_breaches(operator, stranger):
    b = budget(key="acme", limit="10", spent="4")
    other = budget(key="initech", limit="5")
    budget(scope="service", key="openai", limit="100")  # global: admins only
    inst = make_instance(tenant="acme", created_at=now())
    reservation(b, instance=inst, amount="0.75")
    History.objects.create(
        instance=inst,
        workflow=inst.workflow,
        tenant="acme",
        kind="budget",
        step_name="llm-extract",
        data={
            "budget": b.id,
            "service": "openai",
            "amount": "2",
            "limit": "10",
            "spent": "9.5",
            "policy": "fail",
            "denied": False,
        },
        created_at=now(),
    )
    r = operator.get("/budgets/")
    assert r.status_code == 200
    assert [x.key for x in r.context["rows"]] == ["acme"]
    assert b.id in r.context["editable"]
    assert [x["amount"] for x in r.context["reservations"]] == [Decimal("0.75")]
    assert r.context["events"][0]["breach"] is True
    html = r.content.decode()
    assert "$4.00 / $10.00" in html and "breach" in html
    r = stranger.get("/budgets/")
    assert [x.key for x in r.context["rows"]] == ["initech"] and r.context["reservations"] == []
    assert stranger.get(f"/budgets/{b.id}/edit/").status_code == 404
    assert operator.get(f"/budgets/{other.id}/edit/").status_code == 404


def test_a_budget_holding_runs_for_approval_says_it_blocks_them_not_that_it_lasts(operator):
    """Nothing is spent while a step waits for a budget approval: the row says the budget blocks
    the run and how much it asked, on the budgets page, the overview and the API."""
    b = budget(key="acme", limit="0.0001", spent="0", policy="approval")
    quiet = budget(key="acme", period="month", limit="10", spent="0")
    approval(kind="budget", budget=b, requested_amount=Decimal("0.001"), title="Budget would be exceeded")
    approval(
        kind="budget", budget=b, requested_amount=Decimal("0.002"), title="Budget would be exceeded", state="approved"
    )  # answered: no longer held
    html = operator.get("/budgets/").content.decode()
    assert "blocking 1 run" in html and "$0.0030" not in html and "asked $0.0010 more" in html
    rows = {r.id: r for r in operator.get("/budgets/").context["rows"]}
    assert (rows[b.id].waiting, rows[b.id].waiting_asked) == (1, Decimal("0.001"))
    assert (rows[quiet.id].waiting, rows[quiet.id].waiting_asked) == (0, Decimal("0"))
    assert "blocking 1 run" in operator.get("/").content.decode()


def test_an_operator_creates_and_edits_a_tenant_budget_through_the_engine(operator):
    r = operator.post(
        "/budgets/save/", {"scope": "tenant", "key": "acme", "period": "day", "limit": "25.50", "policy": "approval"}
    )
    assert r.status_code == 302
    b = Budget.objects.get(scope="tenant", key="acme", period="day")
    assert b.limit == Decimal("25.5") and b.policy == "approval"
    operator.post(
        "/budgets/save/", {"scope": "tenant", "key": "acme", "period": "day", "limit": "30", "policy": "fail"}
    )
    b.refresh_from_db()
    assert b.limit == Decimal("30") and b.policy == "fail"
    assert History.objects.filter(kind="budget", actor="operator").count() == 2
    assert operator.get(f"/budgets/{b.id}/edit/").context["form"].initial["limit"] == Decimal("30")


def test_viewers_strangers_and_non_admins_cannot_set_budgets_they_do_not_operate(operator, viewer, stranger):
    assert viewer.get("/budgets/new/").status_code == 403
    assert (
        viewer.post(
            "/budgets/save/", {"scope": "tenant", "key": "acme", "period": "day", "limit": "1", "policy": "fail"}
        ).status_code
        == 403
    )
    assert (
        stranger.post(
            "/budgets/save/", {"scope": "tenant", "key": "acme", "period": "day", "limit": "1", "policy": "fail"}
        ).status_code
        == 403
    )
    # global scopes are not offered to non-admin operators: the form refuses them
    r = operator.post(
        "/budgets/save/", {"scope": "service", "key": "openai", "period": "day", "limit": "1", "policy": "fail"}
    )
    assert r.status_code == 400
    assert not Budget.objects.exists()


def test_an_invalid_limit_is_refused_with_the_form_shown_again(operator):
    r = operator.post(
        "/budgets/save/", {"scope": "tenant", "key": "acme", "period": "day", "limit": "-3", "policy": "fail"}
    )
    assert r.status_code == 400 and "greater than or equal to 0" in r.content.decode()
