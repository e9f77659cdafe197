"""A paid call is paid once: a step that dies between a paid call's answer and its completion's
commit is run again from its call journal, not from the provider, and its cost is booked once.

In-process: a step's SystemExit is its worker dying (the engine does not catch it); the test then
lets the instance's lease expire and drains again, as another worker would take it over. The
real thing, SIGKILLed worker processes on PostgreSQL, is tests/engine/test_faults_paid_kill.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from ingest.engine import create, get
from ingest.engine.models import ApiCost, CallJournal, Instance
from ingest.engine.services.retention import journal_prune
from tests.engine.e2e_paid_workflows import PAID_STEPS, crash_and_take_over
from tests.fakes.dataforseo import ROUTE_BACKLINKS, FakeDataForSEO
from tests.fakes.llm import CHAT, FakeOpenAI
from tests.fakes.server import Planned
from tests.fakes.zenrows import ROUTE_API, FakeZenRows

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

ROUTES = {"llm": CHAT, "dataforseo": ROUTE_BACKLINKS, "zenrows": ROUTE_API}


@pytest.fixture
def fakes() -> Iterator[dict[str, Any]]:
    with FakeOpenAI() as llm, FakeDataForSEO() as dfs, FakeZenRows() as zr:
        yield {"llm": llm, "dataforseo": dfs, "zenrows": zr}


@pytest.fixture
def params(fakes: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    return {
        "llm_url": fakes["llm"].url,
        "dfs_url": fakes["dataforseo"].url,
        "zr_url": fakes["zenrows"].url,
        "marks": str(tmp_path),
        "how": "exit",
    }


def calls(fakes: dict[str, Any]) -> dict[str, int]:
    return {name: fakes[name].count(route) for name, route in ROUTES.items()}


@pytest.mark.parametrize("where", ["answer", "booked"])
def test_a_step_that_dies_after_its_paid_answer_is_neither_paid_nor_booked_twice(drain, fakes, params, where):
    iid = create(id=f"paid-{where}", workflow="e2e-paid", params={**params, "die": dict.fromkeys(PAID_STEPS, where)}).id
    for _ in PAID_STEPS:  # each step dies once, after its answer (and, for "booked", its cost)
        crash_and_take_over(drain, iid)
    drain()
    status = get(iid).status()
    assert status["status"] == "complete"
    assert calls(fakes) == {"llm": 1, "dataforseo": 1, "zenrows": 1}  # one paid call per step
    costs = ApiCost.objects.filter(instance_id=iid)
    assert sorted(costs.values_list("step_name", flat=True)) == sorted(PAID_STEPS)  # one booking per step
    assert sum(c.cost for c in costs.filter(service="dataforseo")) == fakes["dataforseo"].billed
    assert sum(c.cost for c in costs.filter(service="zenrows")) == fakes["zenrows"].billed
    # The retry read the answer the lost run was given: the same task, the same page.
    assert status["output"]["dataforseo"]["items"] == 5
    assert Decimal(status["output"]["zenrows"]["cost"]) == fakes["zenrows"].billed


def test_a_retry_after_a_failed_attempt_asks_the_provider_again(drain, fakes, params):
    # A blank answer is billed and fails the attempt (LLMInvalidOutput, retryable): that attempt
    # ended, so the next one calls again instead of replaying the blank answer.
    blank = {
        "id": "x",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 0, "total_tokens": 10},
    }
    fakes["llm"].plan(CHAT, Planned(200, blank))
    iid = create(id="paid-failed", workflow="e2e-paid", params={**params, "steps": ["llm"]}).id
    drain(advance_clock=True)
    assert get(iid).status()["status"] == "complete"
    assert calls(fakes)["llm"] == 2


def test_the_provider_is_given_the_steps_idempotency_key_for_each_call(drain, fakes, params):
    iid = create(id="paid-keys", workflow="e2e-paid", params=params).id
    drain()
    assert get(iid).status()["status"] == "complete"
    [chat] = fakes["llm"].requests_to(CHAT)
    assert chat.header("Idempotency-Key") == f"{iid}:llm:1#1.1"
    [task] = fakes["dataforseo"].requests_to(ROUTE_BACKLINKS)[0].json()
    assert task["tag"] == f"{iid}:dataforseo:1#1.1"


def test_a_sensitive_steps_journaled_answers_are_sealed(drain, fakes, params):
    iid = create(
        id="paid-sensitive", workflow="e2e-paid", params={**params, "sensitive": True, "die": {"dataforseo": "answer"}}
    ).id
    crash_and_take_over(drain, iid)
    rows = list(CallJournal.objects.filter(instance_id=iid).values_list("kind", "answer"))
    assert rows and all(set(answer) == {"$sealed"} for _, answer in rows)
    with connection.cursor() as cursor:
        cursor.execute("SELECT answer FROM engine_calljournal WHERE instance_id = %s", [iid])
        stored = " ".join(str(row[0]) for row in cursor.fetchall())
    assert "backlinks" not in stored and "paid.example" not in stored
    drain()
    assert get(iid).status()["status"] == "complete"
    assert calls(fakes)["dataforseo"] == 1


def test_a_retry_that_asks_another_question_is_sent(drain, fakes, params):
    # The lost run asked for paid.example; the code now asks for another domain at that place:
    # the journaled answer is not its answer, so the call goes out.
    iid = create(
        id="paid-changed",
        workflow="e2e-paid",
        params={**params, "steps": ["dataforseo"], "die": {"dataforseo": "answer"}},
    ).id
    crash_and_take_over(drain, iid)
    Instance.objects.filter(id=iid).update(
        params={**params, "steps": ["dataforseo"], "domain": "other.example", "die": {"dataforseo": "answer"}}
    )
    drain()
    assert get(iid).status()["status"] == "complete"
    sent = [r.json()[0]["target"] for r in fakes["dataforseo"].requests_to(ROUTE_BACKLINKS)]
    assert sent == ["paid.example", "other.example"]


def test_the_journal_of_a_finished_instance_is_pruned_by_retention(drain, fakes, params):
    done = create(id="paid-done", workflow="e2e-paid", params={**params, "steps": ["llm"]}).id
    drain()
    running = create(id="paid-running", workflow="e2e-paid", params={**params, "die": {"dataforseo": "answer"}}).id
    crash_and_take_over(drain, running)
    assert CallJournal.objects.filter(instance_id=done).exists()
    kept = CallJournal.objects.filter(instance_id=running).count()
    assert kept >= 2  # the llm step's call and booking, the dataforseo step's call
    assert journal_prune() > 0
    assert not CallJournal.objects.filter(instance_id=done).exists()
    assert CallJournal.objects.filter(instance_id=running).count() == kept
