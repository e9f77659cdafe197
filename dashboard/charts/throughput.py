"""The throughput chart of the operations overview: finished instances per hour and the
failure rate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from dashboard.charts.figure_spec import BAD, INK, OK, WARN, Figure, _date_axis, _figure


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
            "y": y,
            "name": name,
            "marker": {"color": color},
            "width": [hour_ms * 0.9] * len(x),
            "offset": 0,
        }
        for y, name, color in ((ok, "complete", OK), (warn, "with errors", WARN), (bad, "errored", BAD))
    ]
    data.append(
        {
            "type": "scatter",
            "x": x,
            "y": rate,
            "name": "failure rate %",
            "yaxis": "y2",
            "mode": "lines+markers",
            "line": {"color": INK, "width": 2},
        }
    )
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
