"""url-classify end to end against the fakes: the fetch cascade and its memory, LLM rounds,
the flags, the similarity stage's neighbours, cost rows and budgets."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.db.models import Sum

from ingest.classify.models import DomainFetchMethod, UrlClassification
from ingest.engine import get
from ingest.engine.models import ApiCost, ApprovalRequest
from ingest.engine.services.approvals import approval_answer
from ingest.engine.services.budgets import budget_upsert
from ingest.pipelines.pricing import DEFAULT_PRICES, cost_for
from ingest.sources.llm import usage_from_openai
from ingest.workflows.url_classify import url_classify_start
from tests.classify.conftest import FORTRESS, GONE, PROTECTED
from tests.fakes.classify import FakeClassifyLLM, FakeWeb
from tests.fakes.llm import CHAT
from tests.fakes.server import Planned
from tests.fakes.zenrows import ROUTE_API, ROUTE_SITE

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def classify(tenant: str, drain: Any, url: str, **params: Any) -> dict[str, Any]:
    instance_id = url_classify_start(tenant, url, **params)
    drain()
    status = get(instance_id).status()
    assert status["status"] == "complete", status["error"]
    return {**status["output"], "_id": instance_id, "_steps": [s["name"] for s in status["steps"]]}


def costs(instance_id: str) -> list[ApiCost]:
    return list(ApiCost.objects.filter(instance_id=instance_id).order_by("id"))


def ledger_total(instance_id: str) -> Decimal:
    return ApiCost.objects.filter(instance_id=instance_id).aggregate(t=Sum("cost"))["t"] or Decimal(0)


def test_a_known_platform_stops_at_the_rules_for_free(classify_env: str, drain: Any, fake_web: FakeWeb,
                                                      fake_llm: FakeClassifyLLM) -> None:  # fmt: skip
    out = classify(classify_env, drain, "https://www.youtube.com/watch?v=dQw4w9WgXcQ")
    assert (out["classification_source"], out["stages_run"], out["round"]) == ("rules", ["cache", "rules"], 0)
    assert (out["domain_type"], out["page_type"], out["confidence"]) == ("video", "video", 95)
    assert fake_web.count() == 0 and fake_llm.count() == 0
    # The feedback embedded it with WordLlama: a cost row of 0 marked with its stage and domain.
    [row] = costs(out["_id"])
    assert (row.service, row.cost, row.metadata["stage"], row.metadata["domain"]) == (
        "wordllama",
        0,
        "feedback",
        "youtube.com",
    )


def test_a_protected_site_escalates_to_zenrows_basic_and_the_domain_remembers_it(
    classify_env: str, drain: Any, fake_web: FakeWeb
) -> None:
    out = classify(classify_env, drain, f"http://{PROTECTED}/pricing", skip_llm=True)
    assert out["fetch_method"] == "zenrows_basic" and "content" in out["stages_run"]
    assert out["content_signals"]["has_pricing"] is True and out["page_type"] == "pricing"
    assert fake_web.count(ROUTE_SITE) == 1 and fake_web.count(ROUTE_API) == 1
    assert DomainFetchMethod.objects.get(tenant="acme", host=PROTECTED).method == "zenrows_basic"
    [zen] = [r for r in costs(out["_id"]) if r.service == "zenrows"]
    assert (zen.model, zen.cost, zen.metadata["cost_service"]) == ("basic", Decimal("0.001"), "ZENROWS_BASIC")
    assert (zen.metadata["stage"], zen.metadata["domain"], zen.items) == ("content", PROTECTED, 1)

    # The next page of that host skips the native fetch that would be blocked again.
    again = classify(classify_env, drain, f"http://{PROTECTED}/login", skip_llm=True)
    assert again["fetch_method"] == "zenrows_basic" and again["content_signals"]["has_login"] is True
    assert fake_web.count(ROUTE_SITE) == 1 and fake_web.count(ROUTE_API) == 2


def test_a_site_only_premium_gets_through_costs_the_premium_request_alone(
    classify_env: str, drain: Any, fake_web: FakeWeb
) -> None:
    out = classify(classify_env, drain, f"http://{FORTRESS}/blog/how-we-grew", skip_llm=True)
    assert out["fetch_method"] == "zenrows_premium"
    calls = fake_web.requests_to(ROUTE_API)
    assert [c.query.get("premium_proxy") for c in calls] == [None, ["true"]]  # basic failed (RESP001), unbilled
    rows = [r for r in costs(out["_id"]) if r.service == "zenrows"]
    assert [(r.model, r.cost, r.metadata["cost_service"]) for r in rows] == [
        ("premium", Decimal("0.01"), "ZENROWS_PREMIUM")
    ]
    assert Decimal(str(out["cost_usd"])) == ledger_total(out["_id"]) == fake_web.billed
    assert DomainFetchMethod.objects.get(host=FORTRESS).method == "zenrows_premium"


def test_a_page_that_does_not_exist_is_not_paid_for(classify_env: str, drain: Any, fake_web: FakeWeb) -> None:
    out = classify(classify_env, drain, f"http://{GONE}/old-page", skip_llm=True)
    assert out["fetch_method"] is None and out["content_signals"] is None and "content" in out["stages_run"]
    assert fake_web.count(ROUTE_API) == 0 and not DomainFetchMethod.objects.exists()


def test_skip_content_fetches_nothing(
    classify_env: str, drain: Any, fake_web: FakeWeb, fake_llm: FakeClassifyLLM
) -> None:
    out = classify(classify_env, drain, "http://www.calm-meadow.com/a/b", skip_content=True)
    assert "content" not in out["stages_run"] and "content" not in out["_steps"]
    assert fake_web.count() == 0
    assert out["stages_run"][-1] == "llm" and fake_llm.count(CHAT) >= 1


def test_skip_llm_leaves_a_low_confidence_result_unverified(
    classify_env: str, drain: Any, fake_llm: FakeClassifyLLM
) -> None:
    # skip_content too: the fake page's length (and so the content stage's confidence) varies.
    out = classify(classify_env, drain, "http://www.calm-meadow.com/a/b", skip_llm=True, skip_content=True)
    assert out["confidence"] < 65 and "llm" not in out["stages_run"] and out["round"] == 0
    assert fake_llm.count() == 0


def test_force_llm_verifies_even_a_confident_rule(classify_env: str, drain: Any, fake_llm: FakeClassifyLLM) -> None:
    out = classify(classify_env, drain, "https://github.com/django/django", force_llm=True, skip_content=True)
    assert out["stages_run"] == ["cache", "rules", "similarity", "llm"]
    assert out["classification_source"] == "llm" and out["round"] >= 1 and fake_llm.count(CHAT) == out["round"]


def test_the_llm_answer_is_taken_in_one_round_when_confident(
    classify_env: str, drain: Any, fake_llm: FakeClassifyLLM
) -> None:
    url = "http://www.calm-meadow-shop.com/a/b"
    out = classify(classify_env, drain, url, skip_content=True)
    prompt = fake_llm.requests_to(CHAT)[0].json()["messages"]
    assert "domain_type:" in prompt[0]["content"] and "marketplace" in prompt[0]["content"]  # the taxonomy
    assert out["classification_source"] == "llm" and out["domain_type"] == "commerce"
    rounds = [r for r in costs(out["_id"]) if r.metadata.get("stage") == "llm"]
    assert len(rounds) == out["round"] == fake_llm.count(CHAT)
    expected = sum(
        (
            cost_for(usage_from_openai(u, service="openai", model="gpt-4o-mini"), DEFAULT_PRICES, rounds[0].created_at)
            for u in fake_llm.usages
        ),
        Decimal(0),
    )
    assert sum((r.cost for r in rounds), Decimal(0)) == expected > 0
    assert [(r.service, r.metadata["domain"]) for r in rounds] == [("openai", "calm-meadow-shop.com")] * len(rounds)


def test_unsure_answers_take_every_round_30_seconds_apart(classify_env: str, drain: Any,
                                                          fake_llm: FakeClassifyLLM) -> None:  # fmt: skip
    url = "http://www.calm-meadow.com/x"
    fake_llm.low.add(url)
    instance_id = url_classify_start(classify_env, url, skip_content=True, max_rounds=3)
    drain()
    status = get(instance_id).status()
    out = status["output"]
    assert out["round"] == 3 and fake_llm.count(CHAT) == 3 and out["classification_source"] == "llm"
    names = [s["name"] for s in status["steps"]]
    assert (
        names.index("llm-verify-1")
        < names.index("llm-backoff-1")
        < names.index("llm-verify-2")
        < names.index("llm-backoff-2")
        < names.index("llm-verify-3")
    )
    assert "llm-backoff-3" not in names
    sleeps = [s for s in status["steps"] if s["name"].startswith("llm-backoff")]
    assert all(s.get("duration_seconds", 30) == 30 for s in sleeps)
    assert out["confidence"] < 70  # the best of three unsure answers


def test_max_rounds_bounds_the_rounds(classify_env: str, drain: Any, fake_llm: FakeClassifyLLM) -> None:
    url = "http://www.calm-meadow.com/y"
    fake_llm.low.add(url)
    out = classify(classify_env, drain, url, skip_content=True, max_rounds=1)
    assert out["round"] == 1 and fake_llm.count(CHAT) == 1 and "llm-backoff-1" not in out["_steps"]


def test_answers_outside_the_taxonomy_are_billed_but_decide_nothing(
    classify_env: str, drain: Any, fake_llm: FakeClassifyLLM
) -> None:
    url = "http://www.calm-meadow.com/z"
    fake_llm.invalid.add(url)
    out = classify(classify_env, drain, url, skip_content=True, max_rounds=2)
    assert out["round"] == 2 and out["classification_source"] != "llm" and out["domain_type"] != "spaceship"
    rows = [r for r in costs(out["_id"]) if r.metadata.get("stage") == "llm"]
    assert len(rows) == 2 and all(not r.success and r.cost > 0 for r in rows)


def test_a_blank_answer_is_a_round_without_a_verdict(classify_env: str, drain: Any, fake_llm: FakeClassifyLLM) -> None:
    from tests.fakes.llm import chat_completion

    fake_llm.plan(CHAT, Planned(200, chat_completion("", prompt_tokens=700, completion_tokens=1)))
    out = classify(classify_env, drain, "http://www.calm-meadow-blog.com/q", skip_content=True)
    assert out["round"] >= 2 and out["classification_source"] == "llm" and out["domain_type"] == "blog"
    first = [r for r in costs(out["_id"]) if r.metadata.get("round") == 1]
    assert [(r.tokens_in, r.success) for r in first] == [(700, False)]


def test_the_similarity_stage_finds_the_three_nearest_classified_urls(classify_env: str, drain: Any) -> None:
    # One URL per host: a second URL of a host is decided by the domain cache and not indexed.
    for url in [
        "https://github.com/django/django",
        "https://stackoverflow.com/questions/1/how-to-sort",
        "https://www.reddit.com/r/python/",
        "https://www.youtube.com/watch?v=abc",
    ]:
        classify(classify_env, drain, url)
    instance_id = url_classify_start(classify_env, "http://githubmirror.example/django/django", skip_content=True,
                                     skip_llm=True)  # fmt: skip
    drain()
    similar = next(s for s in get(instance_id).status()["steps"] if s["name"] == "similarity")["result"]
    neighbours = similar["neighbours"]
    assert len(neighbours) == 3
    assert [n["score"] for n in neighbours] == sorted((n["score"] for n in neighbours), reverse=True)
    assert neighbours[0]["url"] == "https://github.com/django/django" and neighbours[0]["score"] > 0.8
    assert similar["candidate"]["labels"]["domain_type"] == "code"
    assert -1 <= neighbours[-1]["score"] < neighbours[0]["score"] <= 1


def test_every_paid_call_has_its_cost_row_and_the_result_sums_them(
    classify_env: str, drain: Any, fake_web: FakeWeb, fake_llm: FakeClassifyLLM
) -> None:
    out = classify(classify_env, drain, f"http://{FORTRESS}/a/b", force_llm=True)
    rows = costs(out["_id"])
    assert {r.metadata["stage"] for r in rows} >= {"similarity", "content", "llm"}
    assert all(r.metadata["domain"] == FORTRESS and r.workflow_type == "url-classify" for r in rows)
    assert Decimal(str(out["cost_usd"])) == ledger_total(out["_id"])
    stored = UrlClassification.objects.get(tenant="acme")
    assert stored.cost_usd == ledger_total(out["_id"]) and stored.fetch_method == "zenrows_premium"


def test_a_fail_budget_stops_zenrows_before_any_spend(classify_env: str, drain: Any, fake_web: FakeWeb) -> None:
    budget_upsert(scope="service", key="zenrows", period="day", limit="0.0005", policy="fail")
    instance_id = url_classify_start(classify_env, f"http://{PROTECTED}/pricing", skip_llm=True)
    drain()
    status = get(instance_id).status()
    assert status["status"] == "errored" and status["error"]["name"] == "BudgetExceeded"
    assert fake_web.count(ROUTE_API) == 0 and not ApiCost.objects.filter(service="zenrows").exists()


def test_an_approval_budget_pauses_the_llm_until_an_operator_grants_more(
    classify_env: str, drain: Any, fake_llm: FakeClassifyLLM
) -> None:
    budget_upsert(scope="service", key="openai", period="month", limit="0", policy="approval")
    instance_id = url_classify_start(classify_env, "http://www.calm-meadow-shop.com/p", skip_content=True)
    drain(max_turns=50)
    assert get(instance_id).status()["status"] == "paused" and fake_llm.count(CHAT) == 0
    request = ApprovalRequest.objects.get(instance_id=instance_id, state="pending")
    assert request.step_name.startswith("llm-verify-1")
    approval_answer(approval_id=request.id, approved=True, values={"amount": "0.05"}, actor="operator")
    drain()
    assert get(instance_id).status()["status"] == "complete" and fake_llm.count(CHAT) >= 1


def test_a_configured_embedding_api_is_reserved_for_and_costed_from_its_usage(
    classify_env: str, drain: Any, fake_llm: FakeClassifyLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ingest.workflows.url_classify.clients import clients_clear
    from tests.fakes.llm import EMBEDDINGS

    monkeypatch.setenv("RUNLEDGER_EMBEDDINGS", "openai")
    monkeypatch.setenv("RUNLEDGER_EMBEDDINGS_BASE_URL", f"{fake_llm.url}/v1")
    monkeypatch.setenv("RUNLEDGER_EMBEDDINGS_API_KEY", "sk-fake")
    clients_clear()
    out = classify(classify_env, drain, "http://www.calm-meadow.com/a/b", skip_content=True, skip_llm=True)
    [row] = [r for r in costs(out["_id"]) if r.metadata.get("stage") == "similarity"]
    sent = fake_llm.requests_to(EMBEDDINGS)[0].json()
    assert sent["input"] == ["calm meadow com a b"] and sent["model"] == "text-embedding-3-small"
    assert (row.service, row.model, row.tokens_in) == ("openai", "text-embedding-3-small", 5)
    from ingest.sources.usage import Usage

    priced = cost_for(Usage("openai", "text-embedding-3-small", input_tokens=5), DEFAULT_PRICES, row.created_at)
    assert row.cost == priced  # $0.02 per 1M tokens: under a millionth of a dollar, rounded to 0.000000
    assert ApiCost.objects.filter(instance_id=out["_id"], service="wordllama").count() == 0


def test_an_anthropic_connection_verifies_through_the_messages_api(
    classify_env: str, drain: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ingest.pipelines.selectors import config_cache_clear
    from ingest.pipelines.services import connection_upsert
    from tests.fakes import FakeAnthropic
    from tests.fakes.llm import MESSAGES, anthropic_message

    with FakeAnthropic() as fake:
        connection_upsert(
            tenant="acme",
            kind="llm",
            base_url=fake.url,
            secret="sk-ant-fake",
            options={"provider": "anthropic", "model": "claude-3-5-haiku-20241022"},
        )
        config_cache_clear()
        answer = '{"domain_type": "saas", "page_type": "pricing", "confidence": 88}'
        fake.plan(MESSAGES, Planned(200, anthropic_message(answer, input_tokens=900, output_tokens=30)))
        out = classify(classify_env, drain, "http://www.calm-meadow.com/plans", skip_content=True)
    assert (out["classification_source"], out["domain_type"], out["confidence"], out["round"]) == ("llm", "saas", 88, 1)
    [row] = [r for r in costs(out["_id"]) if r.metadata.get("stage") == "llm"]
    assert (row.service, row.tokens_in, row.tokens_out) == ("anthropic", 900, 30)
    assert row.cost == Decimal("0.000840")  # 900 × $0.80/M + 30 × $4/M


def test_a_tenant_without_an_llm_connection_stops_before_stage_4(
    classify_env: str, drain: Any, fake_llm: FakeClassifyLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNLEDGER_LLM_PROVIDER", raising=False)
    out = classify("initech", drain, "http://www.calm-meadow.com/a/b", skip_content=True)
    assert out["confidence"] < 65 and "llm" not in out["stages_run"] and fake_llm.count(CHAT) == 0
