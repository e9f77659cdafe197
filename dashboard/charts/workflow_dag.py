"""The workflow page's DAG: the step graph recorded runs took (fanned-out steps as one shape),
its Sugiyama layout by grandalf for the template to draw as SVG, and the heat colour of each node
by the chosen metric."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from grandalf.graphs import Edge, Graph, Vertex
from grandalf.layouts import SugiyamaLayout

_INDEXED = re.compile(r"-(\d+|\{i\})$")


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
