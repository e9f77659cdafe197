"""Pure parts of the operations pages: step shapes, the step graph, its layout, heat colours,
the approval form built from a schema, the params diff. No database."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from dashboard import charts
from dashboard.forms import approval_form_class, params_diff

pytestmark = pytest.mark.pure
T = datetime(2026, 1, 1)


def s(name, a, b):
    return {
        "name": name,
        "started_at": T + timedelta(seconds=a),
        "ended_at": None if b is None else T + timedelta(seconds=b),
    }


def test_indexed_step_names_share_one_shape():
    assert charts.step_shape("persist-facts-3") == "persist-facts-{i}"
    assert charts.step_shape("persist-facts-{i}") == "persist-facts-{i}"
    assert charts.step_shape("llm-extract") == "llm-extract"
    assert charts.step_shape("v2-fetch") == "v2-fetch"


def test_the_graph_puts_concurrent_steps_side_by_side_and_sequential_indexed_steps_in_one_node():
    run = [
        s("prefilter", 0, 1),
        s("persist-facts-1", 1, 2),
        s("persist-facts-2", 2, 3),
        s("fan-a", 3, 6),
        s("fan-b", 3.5, 5),
        s("done", 6, 7),
    ]
    short = [s("prefilter", 0, 1), s("engagement-only", 1, 2)]
    g = charts.step_graph([run, short])
    assert g.nodes == ["prefilter", "persist-facts-{i}", "fan-a", "fan-b", "done", "engagement-only"]
    assert set(g.edges) == {
        ("prefilter", "persist-facts-{i}"),
        ("persist-facts-{i}", "fan-a"),
        ("persist-facts-{i}", "fan-b"),
        ("fan-a", "done"),
        ("fan-b", "done"),
        ("prefilter", "engagement-only"),
    }


def test_parallel_indexed_steps_collapse_into_one_node_too():
    run = [
        s("split", 0, 1),
        s("persist-facts-1", 1, 3),
        s("persist-facts-2", 1, 3),
        s("persist-facts-3", 1.1, 2),
        s("join", 3, 4),
    ]
    g = charts.step_graph([run])
    assert g.nodes == ["split", "persist-facts-{i}", "join"]
    assert g.edges == {("split", "persist-facts-{i}"): 1, ("persist-facts-{i}", "join"): 1}


def test_a_running_step_keeps_later_steps_in_its_level():
    g = charts.step_graph([[s("a", 0, 1), s("b", 1, None), s("c", 1.5, None)]])
    assert set(g.edges) == {("a", "b"), ("a", "c")}


def test_the_layout_has_coordinates_for_every_node_and_edge_within_the_canvas():
    g = charts.StepGraph(["a", "b", "c", "d", "lonely"], {("a", "b"): 3, ("a", "c"): 1, ("b", "d"): 3, ("c", "d"): 1})
    lay = charts.dag_layout(g)
    boxes = {b.name: b for b in lay.nodes}
    assert set(boxes) == {"a", "b", "c", "d", "lonely"}
    assert boxes["a"].y < boxes["b"].y == boxes["c"].y < boxes["d"].y
    assert boxes["b"].x != boxes["c"].x
    for b in lay.nodes:
        assert b.x >= 0 and b.x + b.w <= lay.width and b.y >= 0 and b.y + b.h <= lay.height
    ab = next(e for e in lay.edges if (e.source, e.target) == ("a", "b"))
    assert ab.weight == 3
    assert ab.points[0][1] == boxes["a"].y + boxes["a"].h and ab.points[-1][1] == boxes["b"].y
    assert ab.d.startswith("M ")


def test_heat_colours_go_from_cool_to_hot():
    assert charts.heat_color(0, 10) == "#e8f5ec"
    assert charts.heat_color(10, 10) == "#f4968c"
    assert charts.heat_color(5, 10) == "#fde6aa"


def test_the_approval_form_is_built_from_the_schema_and_validates_types():
    Form = approval_form_class(
        [
            {"name": "amount", "label": "Amount", "type": "number", "required": True},
            {"name": "tier", "label": "Tier", "type": "choice", "required": True, "choices": ["a", ["b", "Bee"]]},
            {"name": "ok", "label": "OK", "type": "boolean", "required": True},
            {"name": "why", "type": "textarea"},
            {"label": "no name: ignored"},
        ]
    )
    f = Form({"decision": "approve", "amount": "x", "f_amount": "2.5", "f_tier": "b"})
    assert f.is_valid(), f.errors
    assert f.values() == {"amount": 2.5, "tier": "b", "ok": False, "why": ""}
    f = Form({"decision": "approve", "f_amount": "lots", "f_tier": "z"})
    assert not f.is_valid() and set(f.errors) == {"f_amount", "f_tier"}
    f = Form({"decision": "reject"})
    assert f.is_valid()
    f = Form({"decision": "maybe", "f_amount": "1", "f_tier": "a"})
    assert not f.is_valid() and "decision" in f.errors


def test_the_params_diff_shows_changed_added_and_removed_keys():
    d = params_diff({"a": 1, "b": 2}, {"a": 1, "b": 3, "c": True})
    assert ("del", '-  "b": 2') in d and ("add", '+  "b": 3,') in d and ("add", '+  "c": true') in d
    assert params_diff({"a": 1}, {"a": 1}) == []
