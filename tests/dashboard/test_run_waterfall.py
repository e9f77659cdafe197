"""The run page's waterfall of turns, steps and attempts, read from the ledger (no tracing needed),
and the run graph drawing steps that ran together as one node with their counts."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from ledger_factories import make_instance

from dashboard.selectors import instance_detail
from dashboard.selectors.run_layout import dag_ranks
from ingest.engine import Workflow, create
from ingest.engine.models import Attempt, History, Step
from ingest.engine.worker.turns import run_until_idle

pytestmark = pytest.mark.db


class Turns(Workflow):
    """Three turns: the first ends in a retry delay, the second in a sleep, the third completes."""

    name = "t-wf-turns"

    def run(self, event, step):
        def flaky(ctx):
            if ctx.attempt == 1:
                raise ConnectionError("reset")
            return "fetched"

        step.do("fetch", flaky, retries={"limit": 2, "delay": "30 seconds"})
        step.sleep("cool-down", "10 minutes")
        return step.do("publish", lambda ctx: "published")


@pytest.mark.django_db
def test_the_waterfall_rows_are_the_ledgers_turns_steps_and_attempts(operator):
    create("t-wf-turns", id="wf-turns", tenant="acme")
    run_until_idle(advance_clock=True)
    user = get_user_model().objects.get(username="operator")
    d = instance_detail(user=user, instance_id="wf-turns")
    assert d is not None and d.instance.status == "complete"

    statuses = list(
        History.objects.filter(instance_id="wf-turns", kind="instance.status")
        .order_by("id")
        .values_list("created_at", "status")
    )
    starts = [at for at, status in statuses if status == "running"]
    ends = [(at, status) for at, status in statuses if status != "running"]
    assert [(t.turn.started, t.turn.ended, t.turn.outcome) for t in d.turns] == [
        (start, end, status) for start, (end, status) in zip(starts, ends, strict=True)
    ]
    assert [t.turn.outcome for t in d.turns] == ["waiting", "waiting", "complete"]
    assert d.turns[1].turn.late is not None and d.turns[1].turn.late >= 0  # woke after its retry delay

    steps = list(Step.objects.filter(instance_id="wf-turns").order_by("position"))
    assert [(r.name, r.kind, r.status) for r in d.waterfall] == [(s.name, s.kind, s.status) for s in steps]
    fetch = d.waterfall[0]
    attempts = list(Attempt.objects.filter(step__instance_id="wf-turns", step__name="fetch").order_by("number"))
    bars = [s for s in fetch.segments if s.css != "gap"]
    assert [(s.css, s.label) for s in bars] == [("failed", "attempt 1: ConnectionError"), ("ok", "attempt 2: ok")]
    assert [s.label for s in fetch.segments if s.css == "gap"] == ["retry delay 30.0s"]

    # Each attempt's bar sits inside the bar of the turn that ran it, on the page's one axis.
    def turn_of(at):
        return next(t for t in d.turns if t.turn.started <= at <= t.turn.ended)

    for attempt, bar in zip(attempts, bars, strict=True):
        turn = turn_of(attempt.started_at)
        assert turn.left - 1e-6 <= bar.left <= turn.left + turn.width + 1e-6
    assert [turn_of(a.started_at).turn.number for a in attempts] == [1, 2]
    publish = d.waterfall[2].segments[0]
    assert publish.left >= d.turns[2].left - 1e-6 and d.turns[0].left < d.turns[1].left < d.turns[2].left
    assert d.breaks, "the 10-minute sleep and the 30 s delay are cut short"

    html = operator.get("/instances/wf-turns/").content.decode()
    wf = html[html.index('id="instance-waterfall"') : html.index('id="instance-steps"')]
    assert re.findall(r'data-turn="(\d+)"', wf) == ["1", "2", "3"] and "3 turns" in wf
    assert "left it waiting" in wf and "left it complete" in wf
    assert re.findall(r'<span class="wf-name" title="[^"]*">([^<]+)</span>', wf) == [
        "turns",
        "fetch",
        "cool-down",
        "publish",
    ]


@pytest.mark.django_db
def test_the_trace_note_points_to_the_ledgers_waterfall_when_tracing_is_off(operator):
    create("t-wf-turns", id="wf-note", tenant="acme")
    run_until_idle(advance_clock=True)
    html = operator.get("/instances/wf-note/").content.decode()
    assert "tracing is off in this process" in html and 'href="#instance-waterfall">waterfall</a>' in html


T = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _step(pk: int, name: str, start: float, end: float, status: str = "complete") -> Step:
    return Step(
        id=pk,
        name=name,
        seq=1,
        position=pk,
        kind="do",
        status=status,
        attempts=1,
        started_at=T + timedelta(seconds=start),
        ended_at=T + timedelta(seconds=end),
    )


def test_steps_that_ran_together_are_one_node_with_their_counts():
    steps = [
        _step(1, "initialize", 0, 1),
        _step(2, "fetch-backlinks", 1, 3),
        _step(3, "fetch-keywords", 1.1, 2),
        _step(4, "fetch-referring-domains", 1.2, 4, status="errored"),
        _step(5, "store", 5, 6),
    ]
    ranks = dag_ranks(steps, now=T + timedelta(seconds=10))
    assert [len(r.nodes) for r in ranks] == [1, 3, 1]
    group = ranks[1].group
    assert group is not None and group.parallel and group.family == "fetch-*"
    assert group.tally == [("complete", 2), ("errored", 1)] and group.status == "errored"
    assert group.names == ["backlinks", "keywords", "referring-domains"]
    # Two at once stay two nodes; three of mixed names with nothing shared read "parallel steps".
    two = dag_ranks([_step(1, "a", 0, 2), _step(2, "b", 0.5, 1)], now=T)
    assert two[0].group is None and len(two[0].nodes) == 2
    mixed = dag_ranks([_step(1, "alpha", 0, 2), _step(2, "beta", 0.5, 1), _step(3, "gamma", 0.6, 1)], now=T)
    assert mixed[0].group is not None and mixed[0].group.family == "parallel steps"


@pytest.mark.django_db
def test_the_run_graph_draws_a_fan_out_as_one_node_with_its_counts(operator):
    inst = make_instance("wf-parallel", status="complete")
    for pk, name, start, end, status in (
        (1, "initialize", 0, 1, "complete"),
        (2, "fetch-backlinks", 1, 3, "complete"),
        (3, "fetch-keywords", 1.1, 2, "complete"),
        (4, "fetch-referring-domains", 1.2, 4, "errored"),
        (5, "store", 5, 6, "complete"),
    ):
        Step.objects.create(
            instance=inst,
            name=name,
            seq=1,
            position=pk,
            status=status,
            attempts=1,
            started_at=T + timedelta(seconds=start),
            ended_at=T + timedelta(seconds=end),
        )
    html = operator.get("/instances/wf-parallel/").content.decode()
    dag = html[html.index('id="instance-dag"') : html.index('id="instance-waterfall"')]
    ranks = dag.split('class="dag-rank"')[1:]
    assert len(ranks) == 3
    group = ranks[1]
    assert 'class="dag-node dag-group st-errored"' in group and "fetch-* ×3" in group
    assert "in parallel · 2 complete, 1 errored" in group
    assert "backlinks · keywords · referring-domains" in group
    assert len(re.findall(r'class="dag-cell st-(?:complete|errored)[ "]', group)) == 3
    assert 'class="dag-cell st-errored dag-fallback"' in group  # the fallback keeps its mark
    assert 'href="#step-fetch-keywords-1"' in group  # each step still one click away
    assert "data-dag-tools" in dag and 'data-dag-zoom="fit"' in dag and 'data-dag-zoom="in"' in dag
