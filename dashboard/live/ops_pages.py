"""The operations pages that update live: overview, dead letters, approvals inbox, workflow DAG.

Each page's context is built here from (user, URL query) — by its view for the first render and
by its live renderer for every push — so a push shows exactly what a reload would. A renderer
runs only when the flushed changes can affect its page (`kinds`) and returns the page's live
partial with `oob=True` (htmx swaps it by id). These are aggregate pages over many rows, so they
are pushed at most once per `min_interval` per socket, not at the runs pages' 4 per second.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.http import QueryDict
from django.template.loader import render_to_string
from django.utils import timezone

from dashboard import access, charts
from dashboard import selectors as sel
from dashboard.live import render
from dashboard.query_params import QueryReader
from ingest.engine import now as engine_now
from ingest.engine import workflow_names
from ingest.engine.models import FINISHED_STATUSES, DeadLetterState

# History kinds that can change what each page shows (everything else is skipped unrendered).
OVERVIEW_KINDS = render.STEP_MOVES | {
    "instance.created",
    "instance.status",
    "cost.recorded",
    "budget",
    "approval",
    "operator",
    "event.received",
}
DEAD_LETTER_KINDS = frozenset({"instance.status", "operator"})
APPROVAL_KINDS = frozenset({"approval", "budget", "step.wait", "event.received", "instance.status", "operator"})
DAG_KINDS = render.STEP_MOVES | {"cost.recorded", "instance.status"}


def sees_global(user: Any) -> bool:
    return bool(user.is_superuser or user.is_staff)


def query_string(query: QueryDict, **overrides: Any) -> str:
    params = {k: v for k, v in query.items() if v}
    params.update(dict(overrides.items()))
    return urlencode({k: v for k, v in params.items() if v not in (None, "")})


DEAD_LETTER_SORTS = ("count", "last", "first")
DAG_WINDOWS = ("1h", "24h", "7d")


# ---- overview ------------------------------------------------------------------------------


def overview_context(user: Any, query: QueryDict) -> dict[str, Any]:
    cursor = sel.history_cursor()  # before the page's reads: a change made meanwhile is pushed on connect
    reader = QueryReader(query)
    window = reader.choice("window", ("24h", "7d"), "24h")
    reader.done()
    tenants, now = access.tenants_for(user), timezone.now()
    today = now.astimezone(timezone.get_current_timezone()).replace(hour=0, minute=0, second=0, microsecond=0)
    spend = sel.spend_by_service(tenants=tenants, since=today)
    budgets = sel.budget_rows(budgets=list(sel.budgets_visible(tenants=tenants, see_global=sees_global(user))), now=now)
    # The tiles count what their link lists: finished ones created in the window (`range=` of the list).
    since = sel.window_start(window, now=now)
    figures = sel.overview_figures(tenants=tenants, since=since)
    return {
        "window": window,
        "counts": figures.counts,
        "finished": FINISHED_STATUSES,
        "total": sum(figures.counts.values()),
        "throughput_html": charts.figure_html(charts.throughput_figure(figures.throughput, since=since, until=now)),
        "in_flight": sel.steps_in_flight(tenants=tenants),
        "in_flight_count": figures.in_flight_count,
        "dead_letters": sel.dead_letters_open_count(tenants=tenants),
        "dl_groups": sel.dead_letter_groups(tenants=tenants, filters=sel.DeadLetterFilters(), limit=5),
        "approvals": sel.approvals_pending_count(tenants=tenants),
        "approval_items": sel.approvals_pending(tenants=tenants)[:5],
        "spend": spend,
        "spend_total": sum((r["total"] for r in spend), Decimal("0")),
        "budgets": sorted(budgets, key=lambda b: -b.forecast.used_pct)[:8],
        "now": now,
        "live_query": urlencode([("view", "overview"), ("after", str(cursor)), ("window", window)]),
    }


# ---- dead letters --------------------------------------------------------------------------


def dead_letter_filters(data: Any, reader: QueryReader | None = None) -> sel.DeadLetterFilters:
    """The list's filters; no `state` at all is the open ones, an empty `state` any state. A bad
    value raises BadQuery, or is left in `reader` for its caller to raise with its own."""
    own = reader is None
    reader = reader or QueryReader(data)
    state = DeadLetterState.OPEN if data.get("state") is None else reader.choice("state", DeadLetterState.values, "")
    f = sel.DeadLetterFilters(
        state=state,
        workflow=reader.text("workflow", max_chars=200),
        step=reader.text("step", max_chars=256),
        error=reader.text("error", max_chars=500),
        tenant=reader.text("tenant", max_chars=100),
        signature=reader.text("signature", max_chars=100),
        q=reader.text("q", max_chars=200),
    )
    if own:
        reader.done()
    return f


def dead_letters_context(user: Any, query: QueryDict) -> dict[str, Any]:
    cursor = sel.history_cursor()  # before the page's reads: a change made meanwhile is pushed on connect
    tenants = access.tenants_for(user)
    reader = QueryReader(query)
    f = dead_letter_filters(query, reader)
    sort = reader.choice("sort", DEAD_LETTER_SORTS, "count")
    reader.done()
    qs = query_string(query)
    context: dict[str, Any] = {
        "f": f,
        "sort": sort,
        "tenants": tenants,
        "states": DeadLetterState.values,
        "can_act_any": bool(access.acting_tenants(user)),
        "groups": sel.dead_letter_groups(tenants=tenants, filters=f, sort=sort),
        "query": qs,
        # A group's "Redrive…" keeps the list's filters: its preview counts what the list shows.
        "group_query": query_string(query, signature=None, sort=None),
        "filter_fields": [(k, v) for k, v in vars(f).items() if v],
        "live_query": "&".join(p for p in (urlencode([("view", "dead_letters"), ("after", str(cursor))]), qs) if p),
    }
    if f.signature:
        context["items"] = sel.dead_letter_items(tenants=tenants, filters=f)
        context["group"] = next(iter(context["groups"]), None)
    return context


# ---- approvals -----------------------------------------------------------------------------


def approvals_context(user: Any) -> dict[str, Any]:
    cursor = sel.history_cursor()  # before the page's reads: a change made meanwhile is pushed on connect
    tenants = access.tenants_for(user)
    # Overdue by the engine's clock, the one that expires the request and wakes its instance.
    return {
        "pending": sel.approvals_pending(tenants=tenants),
        "recent": sel.approvals_recent(tenants=tenants),
        "now": engine_now(),
        "live_query": urlencode([("view", "approvals"), ("after", str(cursor))]),
    }


# ---- workflow DAG --------------------------------------------------------------------------


def workflow_dag_context(user: Any, query: QueryDict, *, name: str) -> dict[str, Any] | None:
    """None when the user's tenants have no run of `name` and no code registers it (the view
    answers 404); a registered workflow without runs has a page, so a first run can be started."""
    reader = QueryReader(query)
    window, now = reader.choice("window", DAG_WINDOWS, "24h"), timezone.now()
    metric = reader.choice("metric", charts.HEAT_METRICS, "retry_rate")
    reader.done()
    cursor = sel.history_cursor()  # before the page's reads: a change made meanwhile is pushed on connect
    tenants = access.tenants_for(user)
    if not (sel.workflow_known(tenants=tenants, name=name) or name in workflow_names()):
        return None
    graph = charts.step_graph(sel.workflow_step_runs(tenants=tenants, name=name))
    heat = sel.workflow_step_heat(tenants=tenants, name=name, since=sel.window_start(window, now=now))
    extra = [shape for shape in heat if shape not in graph.nodes]
    graph = charts.StepGraph(graph.nodes + sorted(extra), graph.edges)
    layout = charts.dag_layout(graph)
    top = max((charts.heat_value(h, metric) for h in heat.values()), default=0.0)
    nodes = []
    for box in layout.nodes:
        h = heat.get(box.name) or sel.empty_heat() | {"p95": None, "retry_rate": 0.0}
        h.pop("p95_parts", None)
        nodes.append({"box": box, "heat": h, "fill": charts.heat_color(charts.heat_value(h, metric), top)})
    return {
        "retention": sel.workflow_retention(tenants=tenants, name=name, now=now),
        "name": name,
        "window": window,
        "windows": DAG_WINDOWS,
        "metric": metric,
        "metrics": charts.HEAT_METRICS,
        "layout": layout,
        "nodes": nodes,
        "live_query": urlencode(
            [
                ("view", "workflow_dag"),
                ("workflow_dag", name),
                ("after", str(cursor)),
                ("window", window),
                ("metric", metric),
            ]
        ),
    }


# ---- live renderers ------------------------------------------------------------------------


def _query_of(sub: render.Subscription) -> QueryDict:
    return QueryDict(urlencode(sub.query, doseq=True))


def render_overview(user: Any, sub: render.Subscription, pending: render.Pending) -> str:
    if not pending.kinds & OVERVIEW_KINDS:
        return ""
    context = overview_context(user, _query_of(sub))
    return render_to_string("ops/overview.html#live", {**context, "oob": True})


def render_dead_letters(user: Any, sub: render.Subscription, pending: render.Pending) -> str:
    if not pending.kinds & DEAD_LETTER_KINDS:
        return ""
    context = dead_letters_context(user, _query_of(sub))
    groups = render_to_string("ops/dead_letters.html#groups", {**context, "oob": True})
    # A group's items follow with it: its count and its list never disagree (a redriven letter
    # that fails again is back in both). Checked boxes keep their state (hx-preserve).
    items = render_to_string("ops/dead_letters.html#items", {**context, "oob": True}) if "items" in context else ""
    return groups + items


def render_approvals(user: Any, sub: render.Subscription, pending: render.Pending) -> str:
    if not pending.kinds & APPROVAL_KINDS:
        return ""
    return render_to_string("ops/approvals.html#inbox", {**approvals_context(user), "oob": True})


def render_workflow_dag(user: Any, sub: render.Subscription, pending: render.Pending) -> str:
    query = _query_of(sub)
    name = query.get("workflow_dag", "")
    if not name or not pending.kinds & DAG_KINDS:
        return ""
    context = workflow_dag_context(user, query, name=name)
    if context is None:
        return ""
    return render_to_string("ops/workflow_dag.html#dag", {**context, "oob": True})


def register_all() -> None:
    render.register("overview", render_overview, min_interval=1.0)
    render.register("dead_letters", render_dead_letters, min_interval=1.0)
    render.register("approvals", render_approvals, min_interval=0.5)
    render.register("workflow_dag", render_workflow_dag, min_interval=2.0)
