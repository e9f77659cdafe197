"""The demo seed: realistic, through the real entry points, idempotent."""

from __future__ import annotations

import pytest
from django.db.models import Sum

from ingest.demo.seed import demo_seed
from ingest.engine import get
from ingest.engine.models import ApiCost, ApprovalRequest, DeadLetter, Instance, InstanceAttributes
from ingest.pipelines.models import Fact, SignalEvaluation
from tests.personas import listed, operator_client

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def test_the_demo_ingests_retries_dead_letters_waits_for_approval_and_runs_once(drain) -> None:
    summary = demo_seed(seed=7, calls=12, opportunities=4)
    assert summary.started == len(summary.instances) == 12 + 2 + 1 + 4
    drain(max_turns=2000)

    statuses = dict(Instance.objects.values_list("id", "status"))
    assert statuses[summary.dead_letter_instance] == "errored"
    assert DeadLetter.objects.get(instance_id=summary.dead_letter_instance).step_name == "keyword-prefilter"
    assert statuses[summary.approval_instance] == "paused"
    assert ApprovalRequest.objects.filter(instance_id=summary.approval_instance, state="pending").count() == 1
    others = {i: s for i, s in statuses.items() if i not in (summary.dead_letter_instance, summary.approval_instance)}
    assert set(others.values()) == {"complete"}

    flaky = [i for i in summary.instances if any(i.endswith(c) for c in summary.flaky_calls)]
    assert flaky
    for instance_id in flaky:
        extract = next(s for s in get(instance_id).status()["steps"] if s["name"] == "llm-extract")
        assert [a["ok"] for a in extract["attempts"]] == [False, True]
    engagement = [i for i in others if (get(i).status()["output"] or {}).get("engagement_only")]
    assert len(engagement) == 2
    assert set(Instance.objects.values_list("tenant", flat=True)) == {"acme", "globex", "initech", "default"}
    assert ApiCost.objects.aggregate(total=Sum("cost"))["total"] > 0
    assert SignalEvaluation.objects.count() == len(others) - len(engagement)

    # the README's newcomer signs in as `operator`: the dead letter and the approval are in its tenants
    from dashboard.access import DEMO_USERS

    operator = dict(next(u for u in DEMO_USERS if u["username"] == "operator")["memberships"])
    assert {
        Instance.objects.get(id=summary.dead_letter_instance).tenant,
        Instance.objects.get(id=summary.approval_instance).tenant,
    } <= set(operator)
    # ...and finds runs by the search attributes the workflows set (README: `?attr=account:hooli`)
    client = operator_client()
    hooli = listed(client, "attr=account:hooli")
    assert summary.dead_letter_instance in hooli
    assert set(
        InstanceAttributes.objects.filter(instance_id__in=hooli).values_list("attributes__account", flat=True)
    ) == {"hooli"}
    call_id = InstanceAttributes.objects.get(instance_id=summary.approval_instance).attributes["call_id"]
    assert listed(client, f"attr=call_id:{call_id}") == [summary.approval_instance]

    facts, instances = Fact.objects.count(), Instance.objects.count()
    again = demo_seed(seed=7, calls=12, opportunities=4)
    assert (again.started, again.already) == (0, len(summary.instances))
    drain()
    assert (Fact.objects.count(), Instance.objects.count()) == (facts, instances)
