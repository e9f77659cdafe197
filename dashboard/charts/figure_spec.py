"""What every chart shares: the pages' colours, the Plotly figure spec (a plain dict) with the
pages' common layout, the date axis over a window, and the figure as an HTML fragment that loads
the locally served plotly.min.js."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import plotly.io as pio

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
