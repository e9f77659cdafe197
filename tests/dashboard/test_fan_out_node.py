"""A fan-out in the run graph: one node with its received/expected bar, refreshing while open."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dashboard.selectors.run_layout import dag_ranks
from ingest.engine import Workflow, create, fan_out_handler
from ingest.engine.models import Step
from ingest.engine.worker.turns import run_until_idle

pytestmark = pytest.mark.db


@fan_out_handler("t-dash-item")
def dash_item(ctx, item):
    if item == "bad":
        raise ValueError("bad item")
    return item


class DashFans(Workflow):
    name = "t-dash-fans"

    def run(self, event, step):
        step.do("before", lambda ctx: 1)
        step.fan_out("score-items", dash_item, event.payload["items"], retries={"limit": 0})
        return "done"


def test_a_fan_out_step_is_one_node_carrying_its_progress():
    t = datetime(2025, 1, 1, tzinfo=UTC)
    before = Step(
        id=1, name="before", seq=1, position=0, kind="do", status="complete", attempts=1, started_at=t, ended_at=t
    )
    fan = Step(id=2, name="score", seq=1, position=1, kind="fan_out", status="waiting", attempts=0, started_at=t)
    ranks = dag_ranks(
        [before, fan], now=t, fan_outs={2: {"received": 3, "expected": 4, "failed": 1, "missing": 0, "state": "open"}}
    )
    node = ranks[1].nodes[0]
    assert node.fan_out is not None and (node.fan_out.received, node.fan_out.expected) == (3, 4)
    assert node.fan_out.percent == 75.0 and ranks[0].nodes[0].fan_out is None


@pytest.mark.django_db
def test_the_instance_page_draws_the_fan_out_bar_and_polls_only_while_items_are_out(operator):
    create("t-dash-fans", id="dash-fans", tenant="acme", params={"items": ["a", "bad", "c"]})
    run_until_idle(max_turns=2)  # the parent's turn and one item
    html = operator.get("/instances/dash-fans/").content.decode()
    assert 'class="fo-bar' in html and "1/3" in html
    assert 'hx-trigger="every 2s"' in html
    run_until_idle()
    html = operator.get("/instances/dash-fans/").content.decode()
    assert "3/3 · 1 failed" in html and 'hx-trigger="every 2s"' not in html
