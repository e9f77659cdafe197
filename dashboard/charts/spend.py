"""The costs page's charts: spend over time per series, the spend treemap, the budget burn-down
and spend per service."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from dashboard.charts.figure_spec import BAD, PALETTE, Figure, _date_axis, _figure


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
