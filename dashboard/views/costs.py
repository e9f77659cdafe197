"""The costs page: spend over time and by dimension, the costliest instances, the budgets' burn,
and the CSV export of the same filtered rows."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from dashboard import access, charts
from dashboard import selectors as sel
from dashboard.query_params import QueryReader
from dashboard.rollups.reads import rollup_view
from dashboard.selectors.cost_tables import cost_by_day, cost_run_percentiles
from dashboard.selectors.costs import INSTANCE_SORTS, run_spend
from dashboard.views.common import HtmxHttpRequest, page, query, sees_global, tenants

WINDOWS = ("24h", "7d", "30d")


def _cost_filters(request: HttpRequest, now: datetime, reader: QueryReader) -> tuple[sel.CostFilters, str]:
    """The page's filters; `from` and `to` (dates, or dates and times, in the server's zone) replace
    the window, `to` counting its whole day."""
    window = reader.choice("window", WINDOWS, "7d")
    here = timezone.get_current_timezone()
    since, until = reader.when("from", naive_as=here), reader.when("to", naive_as=here)
    if since is not None or until is not None:
        window = "custom"
    return sel.CostFilters(
        since=since or sel.window_start(window if window != "custom" else "7d", now=now),
        until=until + timedelta(days=1) if until is not None else None,
        service=reader.text("service", max_chars=200),
        workflow=reader.text("workflow", max_chars=200),
        step=reader.text("step", max_chars=256),
        tenant=reader.text("tenant", max_chars=100),
        model=reader.text("model", max_chars=200),
    ), window


@require_GET
@access.require_role()
def costs(request: HtmxHttpRequest) -> HttpResponse:
    visible, now = tenants(request), timezone.now()
    reader = QueryReader(request.GET)
    f, window = _cost_filters(request, now, reader)
    breakdowns = [*sel.COST_DIMENSIONS, *sel.METADATA_DIMENSIONS]
    by = reader.choice("by", breakdowns, "service")
    sort = reader.choice("sort", INSTANCE_SORTS, "-total")
    part = reader.choice("part", ("runs",))
    reader.done()
    if part == "runs":
        # The per-run percentiles sort every run of the window (a month of 1 M runs: ~0.5 s), so
        # the page asks for them on its own once it is shown, and the rest does not wait.
        percentiles = cost_run_percentiles(tenants=visible, filters=f)
        return render(request, "ops/costs.html#run-percentiles", {"percentiles": percentiles})
    daily = (f.until or now) - f.since > timedelta(days=7)
    budgets = sel.budget_rows(
        budgets=list(sel.budgets_visible(tenants=visible, see_global=sees_global(request))), now=now
    )
    burn = sorted(budgets, key=lambda b: -b.forecast.used_pct)[:6]
    view = rollup_view()  # one read of the roller's state for every figure on the page
    burns = {
        b.id: sel.budget_burn_rows(budget=b, tenants=visible, see_global=sees_global(request), view=view) for b in burn
    }
    series = sel.cost_series(tenants=visible, filters=f, by=by, daily=daily, view=view)
    spend = run_spend(tenants=visible, filters=f, view=view)
    context = {
        "f": f,
        "window": window,
        "by": by,
        "dimensions": breakdowns,
        "selected": {name: getattr(f, name) for name in sel.COST_DIMENSIONS},
        "choices": sel.cost_filter_choices(tenants=visible, since=f.since, view=view),
        "total": sel.cost_total(tenants=visible, filters=f, view=view),
        "series_html": charts.figure_html(
            charts.spend_series_figure(series, since=f.since, until=f.until or now, daily=daily)
        ),
        "treemap_html": charts.figure_html(
            charts.spend_treemap_figure(
                sel.cost_breakdown(tenants=visible, filters=f, by=by, view=view), levels=sel.treemap_levels(by)
            )
        ),
        "treemap_levels": sel.treemap_levels(by),
        "by_dimension": sel.cost_by_dimension(tenants=visible, filters=f, by=by, view=view),
        "instances": sel.cost_by_instance(tenants=visible, filters=f, sort=sort, view=view, spend=spend),
        "days": cost_by_day(tenants=visible, filters=f, view=view),
        "sort": sort,
        "budgets": budgets,
        "burn_html": charts.figure_html(charts.burn_down_figure(burn, burns, now=now)) if burn else "",
        "query": query(request),
        "from_value": request.GET.get("from", ""),
        "to_value": request.GET.get("to", ""),
    }
    return page(request, "ops/costs.html", context, fragment="results")


class _Echo:
    """A file-like object for csv.writer that hands each written line back instead of storing it."""

    def write(self, value: str) -> str:
        return value


@require_GET
@access.require_role()
def costs_export(request: HtmxHttpRequest) -> StreamingHttpResponse:
    reader = QueryReader(request.GET)
    f, _ = _cost_filters(request, timezone.now(), reader)
    reader.done()
    rows = sel.cost_export_rows(tenants=tenants(request), filters=f)
    writer = csv.writer(_Echo())

    def lines() -> Iterator[str]:
        yield writer.writerow(sel.EXPORT_COLUMNS)
        for row in rows:
            yield writer.writerow([_csv_cell(v) for v in row])

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="api-costs-{timezone.now():%Y%m%d-%H%M}.csv"'
    return response


def _csv_cell(value: object) -> object:
    if isinstance(value, Decimal):
        return f"{value:.6f}"
    if isinstance(value, datetime):
        return value.isoformat()
    return "" if value is None else value
