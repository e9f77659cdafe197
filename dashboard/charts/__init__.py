"""Figures for the operations pages: pure functions of selector rows, no ORM.

Plotly figures render as HTML fragments that load the locally served plotly.min.js; the
workflow DAG is laid out with grandalf (Sugiyama layers) and drawn as SVG by the template.

One module per family: figure_spec (colours, the common layout, HTML), throughput (the
overview's chart), spend (the costs page's charts), workflow_dag (the step graph, its layout and
heat colours). Every public name is importable from `dashboard.charts`.
"""

from __future__ import annotations

from dashboard.charts.figure_spec import BAD, INK, MUTED, OK, PALETTE, WARN, Figure, figure_html
from dashboard.charts.spend import burn_down_figure, spend_bar_figure, spend_series_figure, spend_treemap_figure
from dashboard.charts.throughput import throughput_figure
from dashboard.charts.workflow_dag import (
    HEAT_METRICS,
    DagLayout,
    EdgePath,
    NodeBox,
    StepGraph,
    dag_layout,
    heat_color,
    heat_value,
    step_graph,
    step_shape,
)

__all__ = [
    "BAD",
    "HEAT_METRICS",
    "INK",
    "MUTED",
    "OK",
    "PALETTE",
    "WARN",
    "DagLayout",
    "EdgePath",
    "Figure",
    "NodeBox",
    "StepGraph",
    "burn_down_figure",
    "dag_layout",
    "figure_html",
    "heat_color",
    "heat_value",
    "spend_bar_figure",
    "spend_series_figure",
    "spend_treemap_figure",
    "step_graph",
    "step_shape",
    "throughput_figure",
]
