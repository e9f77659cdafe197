"""domain-onboard classifies its ranked keywords by search intent: the rules first, the tenant's
LLM (the fake OpenAI-compatible server) for what they cannot decide, a batch a call, each call
booked under the stage `keyword_intent`; replays and retries pay nothing twice."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.db.models import Sum
from django.test import Client

from dashboard.access import demo_users_ensure
from ingest.classify.keyword_intent import domain_brand, intent_answers, intent_rules
from ingest.engine import get
from ingest.engine import workflow as registry
from ingest.engine.models import ApiCost, ApprovalRequest
from ingest.engine.services.approvals import approval_answer
from ingest.engine.services.budgets import budget_upsert
from ingest.pipelines.selectors import config_cache_clear
from ingest.pipelines.services import connection_upsert
from ingest.rankdisco.models import Domain, RankedKeyword
from ingest.workflows.domain_onboard import domain_onboard_start
from tests.fakes.classify import FakeClassifyLLM
from tests.fakes.dataforseo import ranked_keyword
from tests.fakes.llm import CHAT
from tests.fakes.server import Planned

SMALL = {"backlink_limit": 5, "keyword_limit": 40, "referring_domains_limit": 5}
STAGE = "keyword_intent"


@pytest.fixture
def intent_llm() -> Iterator[FakeClassifyLLM]:
    """Tenant "acme" has an OpenAI-compatible LLM connection on the fake."""
    from ingest.workflows.url_classify.clients import clients_clear

    with FakeClassifyLLM() as fake:
        config_cache_clear()
        clients_clear()
        connection_upsert(
            tenant="acme",
            kind="llm",
            base_url=f"{fake.url}/v1",
            secret="sk-fake",
            options={"provider": "openai", "model": "gpt-4o-mini", "service": "openai"},
        )
        yield fake
        config_cache_clear()
        clients_clear()


@pytest.fixture
def batch_of_5(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr("ingest.workflows.domain_onboard.intents.LLM_BATCH", 5)
    return 5


@pytest.fixture
def no_url_classify(monkeypatch: pytest.MonkeyPatch) -> None:
    """No url-classify deployed: the onboarding's cost is its own rows only."""
    monkeypatch.delitem(registry._registry, "url-classify")


def fetched_keywords(target: str, count: int) -> set[str]:
    return {ranked_keyword(target, i)["keyword_data"]["keyword"] for i in range(count)}


def intent_rows(iid: str) -> Any:
    return ApiCost.objects.filter(instance_id=iid, metadata__stage=STAGE)


# -- the rules and the answer, pure


@pytest.mark.parametrize(
    ("keyword", "intent"),
    [
        ("buy running shoes", "transactional"),
        ("ledger pricing", "transactional"),
        ("pizza near me", "transactional"),
        ("best crm for startups", "commercial"),
        ("hubspot vs salesforce", "commercial"),
        ("orbit review", "commercial"),
        ("acme login", "navigational"),
        ("acme", "navigational"),
        ("youtube", "navigational"),
        ("how to bake bread", "informational"),
        ("what is a ledger", "informational"),
    ],
)
def test_the_rules_decide_keywords_whose_words_point_one_way(keyword: str, intent: str) -> None:
    guess = intent_rules(keyword, brand="acme")
    assert (guess.intent, guess.decided) == (intent, True)


@pytest.mark.parametrize("keyword", ["signal orbit api", "how to buy acme", "acme pricing", "what is the best crm"])
def test_the_rules_leave_keywords_with_no_signal_or_mixed_signals_undecided(keyword: str) -> None:
    assert not intent_rules(keyword, brand="acme").decided


def test_the_brand_is_the_registrable_label_of_the_domain() -> None:
    assert [domain_brand(d) for d in ("acme.example", "shop.acme.co.uk", "www.globex.com")] == [
        "acme",
        "acme",
        "globex",
    ]


def test_an_answer_outside_the_four_intents_or_the_batch_is_dropped() -> None:
    answer = {
        "results": [
            {"id": 0, "intent": "Commercial", "confidence": 88},
            {"id": 1, "intent": "curious"},
            {"id": 7, "intent": "informational"},
            {"id": "x", "intent": "navigational"},
            "junk",
        ]
    }
    assert intent_answers(answer, count=2) == {0: ("commercial", 88)}


# -- through the workflow


@pytest.mark.db
@pytest.mark.django_db(transaction=True)
def test_ranked_keywords_are_classified_by_the_rules_then_the_llm_and_booked_by_stage(
        onboard_clients: Any, intent_llm: FakeClassifyLLM, batch_of_5: int, no_url_classify: None,
        drain: Any) -> None:  # fmt: skip
    iid, _ = domain_onboard_start("acme", "acme.example", **SMALL)
    drain()
    status = get(iid).status()
    assert status["status"] == "complete", status
    domain = Domain.objects.get(tenant="acme", name="acme.example")
    keywords = RankedKeyword.objects.filter(domain=domain)
    assert keywords.count() == len(fetched_keywords("acme.example", 40))
    assert not keywords.filter(intent="").exists()
    # The fake's keywords end in pricing, review, vs, login (the rules' words) or api (no signal).
    ruled = keywords.filter(intent_source="rules")
    assert {(k.keyword.split()[-1], k.intent) for k in ruled} <= {
        ("pricing", "transactional"),
        ("review", "commercial"),
        ("vs", "commercial"),
        ("login", "navigational"),
    }
    asked = keywords.filter(intent_source="llm")
    assert asked.exists() and all(k.keyword.endswith(" api") for k in asked)
    assert set(asked.values_list("intent", flat=True)) == {"informational"}  # as the fake answers "api"
    assert all(70 <= (k.intent_confidence or 0) <= 95 for k in asked)

    names = [s["name"] for s in status["steps"]]
    batches = -(-asked.count() // batch_of_5)
    assert names.index("keyword-intent-rules") < names.index("finalize")
    assert sorted(n for n in names if n.startswith("keyword-intent-llm-")) == sorted(
        f"keyword-intent-llm-{n}" for n in range(1, batches + 1)
    )
    assert intent_llm.count(CHAT) == batches
    metrics = status["output"]["metrics"]
    assert (metrics["keyword_intents_by_rules"], metrics["keyword_intents_by_llm"]) == (ruled.count(), asked.count())
    assert metrics["keyword_intents_undecided"] == 0

    # One cost row per LLM call under the stage, and the domain page's cost by stage reconciles to
    # the cent with what the onboarding spent.
    rows = intent_rows(iid)
    assert rows.count() == batches and {r.service for r in rows} == {"openai"}
    assert {r.metadata["domain"] for r in rows} == {"acme.example"} and all(r.cost > 0 for r in rows)
    total = ApiCost.objects.filter(instance_id=iid).aggregate(t=Sum("cost"))["t"]
    demo_users_ensure()
    viewer = Client()
    assert viewer.login(username="viewer", password="viewer")
    page = viewer.get(f"/domains/{domain.id}/")
    detail = page.context["d"]
    by_stage = {(c["stage"], c["service"]): c for c in detail.cost_by_stage}
    assert by_stage[(STAGE, "openai")]["total"] == rows.aggregate(t=Sum("cost"))["t"]
    assert by_stage[(STAGE, "openai")]["calls"] == batches
    assert detail.cost_total == total
    domain.refresh_from_db()
    assert domain.cost_usd == total
    assert Decimal(str(metrics["keyword_intent_cost_usd"])) == rows.aggregate(t=Sum("cost"))["t"]
    html = page.content.decode()
    assert "Keyword intents" in html and f"{ruled.count()} by the rules, {asked.count()} by the LLM" in html


@pytest.mark.db
@pytest.mark.django_db(transaction=True)
def test_a_replay_and_a_failed_llm_call_pay_no_batch_twice(
        onboard_clients: Any, intent_llm: FakeClassifyLLM, batch_of_5: int, no_url_classify: None,
        drain: Any) -> None:  # fmt: skip
    intent_llm.plan(CHAT, Planned(500, {"error": {"message": "upstream overloaded", "type": "server_error"}}))
    iid, _ = domain_onboard_start("acme", "acme.example", **SMALL)
    drain()
    assert get(iid).status()["status"] == "complete"
    batches = -(-RankedKeyword.objects.filter(intent_source="llm").count() // batch_of_5)
    assert batches >= 2
    assert intent_llm.count(CHAT) >= batches + 1  # the 500 was asked again
    paid = list(intent_rows(iid).filter(success=True).values_list("id", flat=True))
    assert len(paid) == batches  # every batch paid once

    # Run again from finalize: the keyword-intent steps before it are replayed from the ledger.
    calls = intent_llm.count(CHAT)
    get(iid).restart(from_step="finalize", actor="ana", reason="test")
    drain()
    assert get(iid).status()["status"] == "complete"
    assert intent_llm.count(CHAT) == calls
    assert list(intent_rows(iid).filter(success=True).values_list("id", flat=True)) == paid


@pytest.mark.db
@pytest.mark.django_db(transaction=True)
def test_without_an_llm_the_rules_decide_what_they_can_and_the_rest_keep_no_intent(
        onboard_clients: Any, no_url_classify: None, drain: Any) -> None:  # fmt: skip
    iid, _ = domain_onboard_start("acme", "acme.example", **SMALL)
    drain()
    status = get(iid).status()
    assert status["status"] == "complete"
    assert not any(s["name"].startswith("keyword-intent-llm") for s in status["steps"])
    keywords = RankedKeyword.objects.filter(domain__name="acme.example")
    assert not keywords.filter(intent_source="llm").exists()
    assert set(keywords.filter(intent="").values_list("keyword", flat=True)) == {
        k for k in fetched_keywords("acme.example", 40) if k.endswith(" api")
    }
    assert status["output"]["metrics"]["keyword_intents_undecided"] == keywords.filter(intent="").count() > 0
    assert not intent_rows(iid).exists()


@pytest.mark.db
@pytest.mark.django_db(transaction=True)
def test_skip_keyword_intent_skips_its_steps(
    onboard_clients: Any, intent_llm: FakeClassifyLLM, no_url_classify: None, drain: Any
) -> None:
    iid, _ = domain_onboard_start("acme", "acme.example", skip_keyword_intent=True, **SMALL)
    drain()
    status = get(iid).status()
    assert status["status"] == "complete"
    assert not any(s["name"].startswith("keyword-intent") for s in status["steps"])
    assert not RankedKeyword.objects.exclude(intent="").exists() and intent_llm.count(CHAT) == 0


@pytest.mark.db
@pytest.mark.django_db(transaction=True)
def test_an_llm_budget_breach_pauses_for_approval_before_the_call(
        onboard_clients: Any, intent_llm: FakeClassifyLLM, no_url_classify: None, drain: Any) -> None:  # fmt: skip
    budget_upsert(scope="service", key="openai", period="day", limit="0.000001", policy="approval", actor="ana")
    iid, _ = domain_onboard_start("acme", "acme.example", **SMALL)
    drain()
    assert get(iid).status()["status"] == "paused"
    request = ApprovalRequest.objects.get(instance_id=iid, state="pending")
    assert request.budget.key == "openai"
    assert intent_llm.count(CHAT) == 0  # the breaching call was never made
    approval_answer(approval_id=request.id, approved=True, values={"amount": "1.00"}, actor="ana")
    drain()
    assert get(iid).status()["status"] == "complete"
    assert RankedKeyword.objects.filter(intent_source="llm").exists()


@pytest.mark.db
@pytest.mark.django_db(transaction=True)
def test_onboarding_again_keeps_the_rows_and_does_not_ask_the_llm_again(
        onboard_clients: Any, intent_llm: FakeClassifyLLM, no_url_classify: None, drain: Any) -> None:  # fmt: skip
    first, _ = domain_onboard_start("acme", "acme.example", **SMALL)
    drain()
    before = set(RankedKeyword.objects.values_list("keyword", "intent", "intent_source", "intent_confidence"))
    asked = RankedKeyword.objects.filter(intent_source="llm").count()
    assert asked > 0 and intent_llm.count(CHAT) == 1
    second, _ = domain_onboard_start("acme", "acme.example", run="2", **SMALL)
    drain()
    status = get(second).status()
    assert status["status"] == "complete"
    assert set(RankedKeyword.objects.values_list("keyword", "intent", "intent_source", "intent_confidence")) == before
    assert intent_llm.count(CHAT) == 1 and not intent_rows(second).exists()
    metrics = status["output"]["metrics"]
    assert (metrics["keyword_intents_known"], metrics["keyword_intents_by_llm"]) == (asked, 0)
    assert not any(s["name"].startswith("keyword-intent-llm") for s in status["steps"])


@pytest.mark.db
@pytest.mark.django_db(transaction=True)
def test_an_answer_outside_the_four_intents_leaves_that_keyword_undecided_and_is_billed(
        onboard_clients: Any, intent_llm: FakeClassifyLLM, no_url_classify: None, drain: Any) -> None:  # fmt: skip
    odd = sorted(k for k in fetched_keywords("acme.example", 40) if k.endswith(" api"))[0]
    intent_llm.invalid.add(odd)
    iid, _ = domain_onboard_start("acme", "acme.example", **SMALL)
    drain()
    status = get(iid).status()
    assert status["status"] == "complete" and status["output"]["metrics"]["keyword_intents_undecided"] == 1
    row = RankedKeyword.objects.get(keyword=odd)
    assert (row.intent, row.intent_source, row.intent_confidence) == ("", "", None)
    assert intent_rows(iid).count() == intent_llm.count(CHAT) == 1
