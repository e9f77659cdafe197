"""Figures for the operations pages: pure functions of selector rows, no ORM.

Plotly figures render as HTML fragments that load the locally served plotly.min.js; the
workflow DAG is laid out with grandalf (Sugiyama layers) and drawn as SVG by the template.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import plotly.io as pio
from grandalf.graphs import Edge, Graph, Vertex
from grandalf.layouts import SugiyamaLayout

OK, BAD, WARN, INK, MUTED = "#1f9d55", "#d64545", "#d99a1e", "#1f2933", "#7b8794"
PALETTE = [
    "#3b6fd8",
    "#1f9d55",
    "#d99a1e",
    "#8e44ad",
    "#d64545",
    "#16a2b8",
    "#e67e22",
    "#5d6d7e",
    "#c0392b",
    "#27ae60",
    "#2c3e50",
    "#f39c12",
]
_INDEXED = re.compile(r"-(\d+|\{i\})$")


Figure = dict[str, Any]  # a Plotly figure spec: {"data": [traces], "layout": {...}}


def _figure(data: list[dict[str, Any]], layout: dict[str, Any], *, height: int = 300, title: str = "") -> Figure:
    """A figure with the pages' common layout. Built as a plain spec: Plotly's Python objects
    validate and deep-copy every property, which cost tens of milliseconds per chart."""
    base: dict[str, Any] = {
        "height": height,
        "margin": {"l": 48, "r": 16, "t": 36 if title else 12, "b": 36},
        "legend": {"orientation": "h", "y": -0.18},
        "font": {"size": 12, "color": INK},
        "hovermode": "x unified",
    }
    if title:
        base["title"] = {"text": title, "font": {"size": 14}}
    return {"data": data, "layout": {**layout, **base}}


def _date_axis(layout: dict[str, Any], since: datetime | None, until: datetime | None) -> dict[str, Any]:
    if since is not None and until is not None:
        layout["xaxis"] = {**layout.get("xaxis", {}), "range": [since, until], "type": "date"}
    return layout


@functools.cache
def _white_template() -> dict[str, Any]:
    return pio.templates["plotly_white"].to_plotly_json()  # type: ignore[no-any-return]


def figure_html(fig: Figure) -> str:
    """The figure as an HTML fragment in the "plotly_white" template; plotly.min.js is loaded once
    by the page, from static/. The template's JSON is computed once per process."""
    spec = {"data": fig["data"], "layout": {**fig["layout"], "template": _white_template()}}
    return str(
        pio.to_html(
            spec,
            validate=False,
            full_html=False,
            include_plotlyjs=False,
            config={"displayModeBar": False, "responsive": True},
        )
    )


def throughput_figure(
    rows: Sequence[Mapping[str, Any]], *, since: datetime | None = None, until: datetime | None = None
) -> Figure:
    """Finished instances per hour (stacked complete / with errors / errored) and the failure
    rate on the right (completed_with_errors is a warning: it finished, so not a failure).

    Bars are an hour wide and the axis spans the whole window: a single busy hour otherwise
    fills the chart and Plotly labels its axis in fractions of a millisecond."""
    x = [r["bucket"] for r in rows]
    ok = [r["complete"] for r in rows]
    warn = [r.get("with_errors", 0) for r in rows]
    bad = [r["errored"] for r in rows]
    rate = [(b / (o + w + b) * 100) if (o + w + b) else 0.0 for o, w, b in zip(ok, warn, bad, strict=True)]
    hour_ms = 3_600_000
    data: list[dict[str, Any]] = [
        {
            "type": "bar",
            "x": x,
            "y": ok,
            "name": "complete",
            "marker": {"color": OK},
            "width": [hour_ms * 0.9] * len(x),
            "offset": 0,
        },
        {
            "type": "bar",
            "x": x,
            "y": warn,
            "name": "with errors",
            "marker": {"color": WARN},
            "width": [hour_ms * 0.9] * len(x),
            "offset": 0,
        },
        {
            "type": "bar",
            "x": x,
            "y": bad,
            "name": "errored",
            "marker": {"color": BAD},
            "width": [hour_ms * 0.9] * len(x),
            "offset": 0,
        },
        {
            "type": "scatter",
            "x": x,
            "y": rate,
            "name": "failure rate %",
            "yaxis": "y2",
            "mode": "lines+markers",
            "line": {"color": INK, "width": 2},
        },
    ]
    layout = {
        "barmode": "stack",
        "yaxis": {"title": {"text": "instances / hour"}},
        "yaxis2": {
            "title": {"text": "failure %"},
            "overlaying": "y",
            "side": "right",
            "range": [0, 100],
            "tickvals": [0, 25, 50, 75, 100],
            "ticksuffix": "%",
            "showgrid": False,
        },
    }
    if until is not None:
        # Each bar spans its hour from the hour's start: the axis runs to the end of the current
        # hour, so the hour in progress is drawn whole, left of the right-hand axis.
        hour_start = until.replace(minute=0, second=0, microsecond=0)
        until = hour_start + timedelta(hours=1) if hour_start != until else until
    figure = _figure(data, _date_axis(layout, since, until))
    figure["layout"]["margin"] = {**figure["layout"]["margin"], "r": 56}
    return figure


def _filled(
    buckets: set[datetime], *, since: datetime | None, until: datetime | None, step: timedelta
) -> list[datetime]:
    """Every bucket of the window, the empty ones too, aligned on the buckets that have spend (they
    are local hours or local midnights): a series with spend in one hour of a week is a line that
    rises once, not a lone dot. Capped, so a custom window of years keeps only the spent buckets."""
    if not buckets or since is None or until is None:
        return sorted(buckets)
    first, last = min(buckets), max(buckets)
    if (until - since) / step > 2000:
        return sorted(buckets)
    out: set[datetime] = set(buckets)
    t = first
    while t - step >= since:
        t -= step
        out.add(t)
    t = last
    while t + step <= until:
        t += step
        out.add(t)
    t = first
    while t < last:
        t += step
        out.add(t)
    return sorted(out)


def spend_series_figure(
    rows: Sequence[Mapping[str, Any]],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    daily: bool = False,
) -> Figure:
    """Stacked spend over time, one trace per key (service, workflow, step, tenant or model), with a
    point for every hour (or day) of the window, zero where nothing was spent."""
    series: dict[str, dict[datetime, float]] = defaultdict(dict)
    buckets: set[datetime] = set()
    for r in rows:
        series[r["key"] or "(none)"][r["bucket"]] = float(r["total"])
        buckets.add(r["bucket"])
    x = _filled(buckets, since=since, until=until, step=timedelta(days=1) if daily else timedelta(hours=1))
    totals = {k: sum(v.values()) for k, v in series.items()}
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "x": x,
            "y": [series[key].get(b, 0.0) for b in x],
            "name": key,
            "stackgroup": "spend",
            "mode": "lines+markers" if len(x) <= 2 else "lines",
            "line": {"width": 1, "color": PALETTE[i % len(PALETTE)], "shape": "hv"},
            "hovertemplate": "%{y:$.4f}",
        }
        for i, key in enumerate(sorted(series, key=lambda k: -totals[k]))
    ]
    layout = {"yaxis": {"title": {"text": "USD"}, "tickprefix": "$"}, "hovermode": "x unified"}
    return _figure(data, _date_axis(layout, since, until), height=320)


def spend_treemap_figure(
    rows: Sequence[Mapping[str, Any]], *, levels: Sequence[str] = ("service", "workflow", "step")
) -> Figure:
    """Spend as nested rectangles, `levels` deep (the chosen breakdown first), sized by spend."""
    ids, labels, parents, values = [], [], [], []
    inner: dict[tuple[str, ...], float] = defaultdict(float)
    for r in rows:
        path = tuple(r["path"]) if "path" in r else tuple(r[k] for k in levels)
        v = float(r["total"])
        for depth in range(1, len(path)):
            inner[path[:depth]] += v
        ids.append("/".join(path))
        labels.append(path[-1])
        parents.append("/".join(path[:-1]))
        values.append(v)
    for path, v in inner.items():
        ids.append("/".join(path))
        labels.append(path[-1])
        parents.append("/".join(path[:-1]))
        values.append(v)
    data = [
        {
            "type": "treemap",
            "ids": ids,
            "labels": labels,
            "parents": parents,
            "values": values,
            "branchvalues": "total",
            "texttemplate": "%{label}<br>$%{value:.4f}",
            "hovertemplate": "%{id}<br>$%{value:.6f}<extra></extra>",
        }
    ]
    return {"data": data, "layout": {"margin": {"l": 4, "r": 4, "t": 4, "b": 4}, "height": 320}}


def burn_down_figure(
    budgets: Sequence[Any], burns: Mapping[int, Sequence[Mapping[str, Any]]], *, now: datetime
) -> Figure:
    """One small chart per budget (its own period and its own dollar scale, so a $5 budget and a
    $0.0001 one are both readable and equal budgets do not hide behind each other): remaining
    budget over the current period, and a dashed linear forecast to its end."""
    data: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    layout: dict[str, Any] = {}
    n = len(budgets)
    columns = 2 if n > 1 else 1
    rows = (n + columns - 1) // columns
    for i, b in enumerate(budgets):
        axis = "" if i == 0 else str(i + 1)
        color = PALETTE[i % len(PALETTE)]
        label = f"{b.scope}:{b.key}/{b.period}"
        x, y, left = [b.period_start], [float(b.limit)], float(b.limit)
        for r in burns.get(b.id, ()):
            left -= float(r["total"])
            x.append(r["bucket"])
            y.append(left)
        remaining_now = float(b.limit - b.spent)
        x.append(now)
        y.append(remaining_now)
        data.append(
            {
                "type": "scatter",
                "x": x,
                "y": y,
                "name": label,
                "mode": "lines",
                "showlegend": False,
                "xaxis": f"x{axis}",
                "yaxis": f"y{axis}",
                "line": {"color": color, "width": 2, "shape": "hv"},
                "hovertemplate": "$%{y:.4f} left<extra>" + label + "</extra>",
            }
        )
        fc = b.forecast
        end_x = fc.runs_out_at if fc.runs_out_at and fc.runs_out_at > now else b.period_end
        end_y = 0.0 if fc.runs_out_at else float(b.limit - fc.projected)
        data.append(
            {
                "type": "scatter",
                "x": [now, end_x],
                "y": [remaining_now, end_y],
                "mode": "lines",
                "showlegend": False,
                "xaxis": f"x{axis}",
                "yaxis": f"y{axis}",
                "line": {"color": color, "dash": "dash", "width": 1.5},
                "hovertemplate": "forecast $%{y:.4f}<extra>" + label + "</extra>",
            }
        )
        layout[f"xaxis{axis}"] = {"range": [b.period_start, b.period_end], "type": "date", "nticks": 4}
        layout[f"yaxis{axis}"] = {
            "range": [min(0.0, min(y)) * 1.05, float(b.limit) * 1.08],
            "tickprefix": "$",
            "nticks": 4,
            "zeroline": True,
            "zerolinecolor": BAD,
            # dollars, not SI: a $0.0001 budget reads $0.0001, not $100µ
            "tickformat": ",.4~f" if b.limit < 1 else ",.2~f",
        }
        annotations.append(
            {
                "text": f"<b>{label}</b>",
                "showarrow": False,
                "xref": f"x{axis} domain",
                "yref": f"y{axis} domain",
                "x": 0,
                "y": 1.0,
                "xanchor": "left",
                "yanchor": "bottom",
                "font": {"size": 11},
            }
        )
    layout.update(
        {
            "grid": {"rows": rows, "columns": columns, "pattern": "independent", "ygap": 0.45, "xgap": 0.12},
            "annotations": annotations,
            "showlegend": False,
        }
    )
    return _figure(data, layout, height=max(200, 170 * rows))


def spend_bar_figure(rows: Sequence[Mapping[str, Any]]) -> Figure:
    data = [
        {
            "type": "bar",
            "x": [float(r["total"]) for r in rows],
            "y": [r["service"] for r in rows],
            "orientation": "h",
            "marker": {"color": PALETTE[0]},
            "hovertemplate": "$%{x:.4f}<extra></extra>",
        }
    ]
    layout = {"xaxis": {"tickprefix": "$"}, "yaxis": {"autorange": "reversed"}}
    return _figure(data, layout, height=max(160, 40 + 28 * len(rows)))


def step_shape(name: str) -> str:
    return _INDEXED.sub("-{i}", name)


@dataclass(frozen=True)
class StepGraph:
    nodes: list[str]  # step shapes, in order of first appearance
    edges: dict[tuple[str, str], int]  # (from, to) → runs that took it


def _levels(run: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Group a run's steps (position order) into levels: a step that started before every step
    of the current level had ended ran concurrently with it (fan-out), so it joins that level."""
    levels: list[list[str]] = []
    level_end: datetime | None = None
    open_level = False
    for s in run:
        concurrent = open_level and (level_end is None or s["started_at"] < level_end)
        if concurrent:
            levels[-1].append(step_shape(s["name"]))
            if s["ended_at"] is None or (level_end is not None and s["ended_at"] < level_end):
                level_end = s["ended_at"]
        else:
            levels.append([step_shape(s["name"])])
            level_end = s["ended_at"]
            open_level = True
    merged: list[list[str]] = []
    for lv in levels:
        shapes = list(dict.fromkeys(lv))
        if merged and merged[-1] == shapes:  # persist-facts-1, -2, -3 one after the other
            continue
        merged.append(shapes)
    return merged


def step_graph(runs: Iterable[Sequence[Mapping[str, Any]]]) -> StepGraph:
    """The workflow's step graph from recorded runs: the union of each run's levels, with an edge
    from every step of a level to every step of the next (consecutive positions)."""
    order: dict[str, int] = {}
    edges: dict[tuple[str, str], int] = defaultdict(int)
    for run in runs:
        levels = _levels(run)
        for lv in levels:
            for shape in lv:
                order.setdefault(shape, len(order))
        seen: set[tuple[str, str]] = set()
        for a_level, b_level in zip(levels, levels[1:], strict=False):
            for a in a_level:
                for b in b_level:
                    if a != b:
                        seen.add((a, b))
        for e in seen:
            edges[e] += 1
    return StepGraph(sorted(order, key=order.__getitem__), dict(edges))


@dataclass(frozen=True)
class NodeBox:
    name: str
    x: float  # top-left corner
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2


@dataclass(frozen=True)
class EdgePath:
    source: str
    target: str
    points: list[tuple[float, float]]
    weight: int

    @property
    def d(self) -> str:
        return "M " + " L ".join(f"{x:.1f} {y:.1f}" for x, y in self.points)


@dataclass(frozen=True)
class DagLayout:
    width: float
    height: float
    nodes: list[NodeBox]
    edges: list[EdgePath]


class _View:
    def __init__(self, w: float, h: float) -> None:
        self.w, self.h = w, h
        self.xy: tuple[float, float] = (0.0, 0.0)


class _EdgeView:
    def __init__(self) -> None:
        self.points: list[tuple[float, float]] = []

    def setpath(self, pts: list[tuple[float, float]]) -> None:
        self.points = [(float(x), float(y)) for x, y in pts]


def dag_layout(graph: StepGraph, *, node_w: float = 200, node_h: float = 70, margin: float = 24) -> DagLayout:
    """Sugiyama layout (grandalf) of the step graph, top to bottom, shifted to positive SVG space.
    Disconnected parts are laid out separately and placed side by side."""
    vertices = {name: Vertex(name) for name in graph.nodes}
    for v in vertices.values():
        v.view = _View(node_w, node_h)
    gedges = []
    for (a, b), n in graph.edges.items():
        e = Edge(vertices[a], vertices[b], w=n)
        e.view = _EdgeView()
        gedges.append(e)
    g = Graph(list(vertices.values()), gedges)
    boxes: list[NodeBox] = []
    paths: list[EdgePath] = []
    offset_x, height = margin, 0.0
    for comp in g.C:
        sug = SugiyamaLayout(comp)
        sug.xspace, sug.yspace = 36, 48
        roots = [v for v in comp.sV if not v.e_in()]
        sug.init_all(roots=roots or None)
        sug.draw()
        xs = [v.view.xy[0] for v in comp.sV]
        ys = [v.view.xy[1] for v in comp.sV]
        min_x, min_y = min(xs) - node_w / 2, min(ys) - node_h / 2
        dx, dy = offset_x - min_x, margin - min_y
        for v in comp.sV:
            cx, cy = v.view.xy
            boxes.append(NodeBox(v.data, cx - node_w / 2 + dx, cy - node_h / 2 + dy, node_w, node_h))
        for e in comp.sE:
            pts = [(x + dx, y + dy) for x, y in (e.view.points or [e.v[0].view.xy, e.v[1].view.xy])]
            src, dst = e.v[0].data, e.v[1].data
            if pts[0][1] > pts[-1][1]:  # grandalf reversed a cycle's edge: draw it as recorded
                pts.reverse()
            pts[0] = (pts[0][0], pts[0][1] + node_h / 2)
            pts[-1] = (pts[-1][0], pts[-1][1] - node_h / 2)
            paths.append(EdgePath(src, dst, pts, graph.edges.get((src, dst), 1)))
        offset_x += max(xs) - min(xs) + node_w + 2 * margin
        height = max(height, max(ys) - min(ys) + node_h + 2 * margin)
    order = {n: i for i, n in enumerate(graph.nodes)}
    boxes.sort(key=lambda b: order[b.name])
    return DagLayout(max(offset_x - margin, 2 * margin), max(height, 2 * margin), boxes, paths)


HEAT_METRICS = {
    "retry_rate": "retry rate",
    "p95": "p95 duration",
    "cost": "cost",
    "dead_letters": "dead letters",
    "in_flight": "in flight",
    "completed": "completed",
}


def heat_color(value: float, top: float) -> str:
    """Green (cool) → amber → red (hot), by value relative to the hottest node."""
    if top <= 0 or value <= 0:
        return "#e8f5ec"
    t = min(value / top, 1.0)
    stops = [(0.0, (232, 245, 236)), (0.5, (253, 230, 170)), (1.0, (244, 150, 140))]
    for (t0, c0), (t1, c1) in zip(stops, stops[1:], strict=False):
        if t <= t1:
            f = (t - t0) / (t1 - t0)
            r, g, b = (round(a + (bb - a) * f) for a, bb in zip(c0, c1, strict=True))
            return f"#{r:02x}{g:02x}{b:02x}"
    return "#f4968c"


def heat_value(node: Mapping[str, Any], metric: str) -> float:
    v = node.get(metric)
    if v is None:
        return 0.0
    return float(v) if isinstance(v, (int, float, Decimal)) else 0.0
