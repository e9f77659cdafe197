"""Overview, workflows and the workflow DAG page, from the operator, viewer and stranger sides."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from test_ops_factories import approval, budget, cost, failed_instance, make_instance, now, step

pytestmark = pytest.mark.db


def test_anonymous_users_are_sent_to_log_in_from_every_ops_page(client, db):
    for url in ("/", "/workflows/", "/dead-letters/", "/costs/", "/budgets/", "/approvals/"):
        r = client.get(url)
        assert r.status_code == 302 and r["Location"].startswith("/login/"), url


def test_the_overview_counts_instances_by_status_in_my_tenants_only(operator, stranger):
    make_instance(tenant="acme", status="running")
    make_instance(tenant="acme", status="complete", created_at=now(), ended_at=now())
    make_instance(tenant="initech", status="errored", created_at=now(), ended_at=now())
    make_instance(tenant="acme", status="complete", created_at=now() - timedelta(days=2))  # before the 24 h window
    failed_instance(tenant="acme")
    approval(tenant="acme")
    budget(key="acme", limit="10", spent="7.5")
    cost(tenant="acme", amount="1.250000", at=now())
    r = operator.get("/")
    assert r.status_code == 200
    ctx = r.context
    assert ctx["counts"]["running"] == 1 and ctx["counts"]["waiting"] == 1
    assert ctx["counts"]["errored"] == 1  # acme's dead-lettered one; initech's is not counted
    assert ctx["counts"]["complete"] == 1  # finished ones count inside the window, as the tile's link lists
    assert 'href="/instances/?status=complete&amp;range=24h"' in r.content.decode()
    assert 'href="/instances/?status=running"' in r.content.decode()  # live ones: every one running now
    assert ctx["dead_letters"] == 1 and ctx["approvals"] == 1
    assert ctx["spend_total"] == ctx["spend"][0]["total"]
    html = r.content.decode()
    assert "dead letters waiting" in html and "approvals waiting" in html
    assert "$1.25" in html and "$7.50 / $10.00" in html
    r = stranger.get("/")
    assert r.context["counts"]["errored"] == 1 and r.context["counts"]["running"] == 0
    assert r.context["dead_letters"] == 0 and r.context["approvals"] == 0
    assert "$7.50" not in r.content.decode()


def test_the_overview_draws_throughput_with_plotly_from_the_local_script(viewer):
    make_instance(tenant="acme", status="complete", ended_at=now())
    make_instance(tenant="acme", status="errored", ended_at=now())
    html = viewer.get("/").content.decode()
    assert "/static/vendor/plotly.min.js" in html and "cdn.plot.ly" not in html
    assert "Plotly.newPlot" in html and "failure rate %" in html


def test_an_htmx_request_gets_only_the_live_fragments(viewer):
    r = viewer.get("/?window=7d", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert 'id="overview-counters"' in html and 'hx-swap-oob="true"' in html and "<html" not in html


def _indexed_run(tenant: str = "acme", workflow: str = "gong-ingest"):
    inst = make_instance(tenant=tenant, workflow=workflow, status="complete", created_at=now() - timedelta(minutes=3))
    step(inst, "keyword-prefilter", position=1, start=0, end=1)
    step(inst, "llm-extract", position=2, start=1, end=3, attempts=3)
    step(inst, "persist-facts-1", position=3, start=3, end=4)
    step(inst, "persist-facts-2", position=4, start=4, end=5)
    step(inst, "persist-facts-3", position=5, start=5, end=6)
    step(inst, "embed-a", position=6, start=6, end=9)
    step(inst, "embed-b", position=7, start=6.2, end=8)
    step(inst, "emit-signal-eval", position=8, start=9, end=10)
    return inst


def test_the_dag_groups_indexed_steps_into_one_node_with_layout_coordinates(operator):
    inst = _indexed_run()
    cost(instance=inst, step="persist-facts-2", service="pinecone", amount="0.200000")
    cost(instance=inst, step="persist-facts-3", service="pinecone", amount="0.300000")
    r = operator.get("/workflows/gong-ingest/?window=24h")
    assert r.status_code == 200
    nodes = {n["box"].name: n for n in r.context["nodes"]}
    assert set(nodes) == {
        "keyword-prefilter",
        "llm-extract",
        "persist-facts-{i}",
        "embed-a",
        "embed-b",
        "emit-signal-eval",
    }
    assert nodes["persist-facts-{i}"]["heat"]["completed"] == 3
    assert nodes["persist-facts-{i}"]["heat"]["cost"] == Decimal("0.5")
    assert nodes["llm-extract"]["heat"]["retry_rate"] == 1.0
    # Sugiyama layers: each node below its predecessor; the concurrent pair side by side.
    y = {k: v["box"].y for k, v in nodes.items()}
    assert y["keyword-prefilter"] < y["llm-extract"] < y["persist-facts-{i}"] < y["embed-a"] < y["emit-signal-eval"]
    assert y["embed-a"] == y["embed-b"] and nodes["embed-a"]["box"].x != nodes["embed-b"]["box"].x
    edges = {(e.source, e.target) for e in r.context["layout"].edges}
    assert ("persist-facts-{i}", "embed-a") in edges and ("embed-b", "emit-signal-eval") in edges
    html = r.content.decode()
    assert html.count('<rect class="node"') == 6
    assert re.search(r'<path class="edge" d="M [\d.]+ [\d.]+ L', html)
    assert "persist-facts-{i}" in html


def test_the_dag_page_is_404_for_a_workflow_only_another_tenant_ran(operator, stranger, viewer):
    _indexed_run(tenant="initech", workflow="sfdc-ingest")
    assert operator.get("/workflows/sfdc-ingest/").status_code == 404
    assert viewer.get("/workflows/sfdc-ingest/").status_code == 404
    assert stranger.get("/workflows/sfdc-ingest/").status_code == 200


def test_the_workflow_list_shows_counts_and_links_to_the_dag(viewer):
    _indexed_run()
    failed_instance(tenant="acme")
    r = viewer.get("/workflows/?window=24h")
    row = next(x for x in r.context["rows"] if x["workflow"] == "gong-ingest")
    assert row["total"] == 2 and row["errored"] == 1 and row["complete"] == 1
    assert 'href="/workflows/gong-ingest/?window=24h"' in r.content.decode()


def test_the_dag_heat_counts_open_dead_letters_at_their_step(viewer):
    _indexed_run()
    failed_instance(tenant="acme", step="llm-extract")
    failed_instance(tenant="acme", step="llm-extract")
    r = viewer.get("/workflows/gong-ingest/?metric=dead_letters")
    nodes = {n["box"].name: n for n in r.context["nodes"]}
    assert nodes["llm-extract"]["heat"]["dead_letters"] == 2
    assert nodes["llm-extract"]["fill"] != nodes["keyword-prefilter"]["fill"]
