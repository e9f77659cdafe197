"""Costs per attempt, reconciled to the provider's usage, and budget gates with approvals."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db.models import Sum

from ingest.engine import get
from ingest.engine.models import ApiCost, ApprovalRequest, Budget
from ingest.engine.services.approvals import approval_answer
from ingest.engine.services.budgets import budget_upsert
from ingest.extraction.prompt import SYSTEM_PROMPT
from ingest.pipelines.pricing import DEFAULT_PRICES, cost_for
from ingest.pipelines.services import price_upsert
from ingest.sources.llm import usage_from_openai
from ingest.sources.usage import Usage
from ingest.workflows import gong_ingest_start
from tests.fakes import FakeOpenAI, Planned
from tests.fakes.llm import CHAT, _facts_json, chat_completion, tokens

pytestmark = [pytest.mark.db, pytest.mark.django_db]

TRANSCRIPT = (
    "Dana Whitfield: Our budget for this is $120k and our CFO needs to sign off.\n"
    "Maya Chen: For 80 seats our annual price would be $96,000.\n"
    "Sam Okafor: We are also evaluating Clari.\n"
)


def real_answer_usage(fake: FakeOpenAI, request_index: int, *, cached: int = 0) -> Usage:
    """The usage the fake's real handler reported for one recorded request."""
    body = fake.requests_to(CHAT)[request_index].json()
    system = "".join(m["content"] for m in body["messages"] if m["role"] == "system")
    user = "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")
    return Usage("openai", "gpt-4o-mini", tokens(system) + tokens(user), cached, tokens(_facts_json(user)))


def instance_cost(instance_id: str) -> Decimal:
    return ApiCost.objects.filter(instance_id=instance_id).aggregate(total=Sum("cost"))["total"] or Decimal(0)


def priced(*usages: Usage) -> Decimal:
    at = datetime.now(UTC)
    return sum((cost_for(u, DEFAULT_PRICES, at) for u in usages), Decimal(0))


def test_costs_reconcile_to_the_provider_usage_with_429_blank_and_malformed_attempts_counted(
    openai_tenant: str, fake_openai: FakeOpenAI, drain
) -> None:
    blank = chat_completion("", prompt_tokens=900, completion_tokens=1)
    broken = chat_completion('{"facts": [{"subject": ', prompt_tokens=900, completion_tokens=7, cached_tokens=800)
    fake_openai.plan(
        CHAT,
        Planned(429, {"error": {"message": "Rate limit"}}, {"Retry-After": "20"}),
        Planned(200, blank),
        Planned(200, broken),
    )
    started = gong_ingest_start("acme", {"id": "1001", "title": "Acme Logistics <> Northwind"}, transcript=TRANSCRIPT)
    drain()
    status = get(started.instance_id).status()
    assert status["status"] == "complete", status["error"]
    extract = next(s for s in status["steps"] if s["name"] == "llm-extract")
    assert [a["ok"] for a in extract["attempts"]] == [False, False, False, True]
    assert [a["error"]["name"].rsplit(".", 1)[-1] for a in extract["attempts"][:3]] == [
        "LLMRateLimited",
        "LLMInvalidOutput",
        "LLMInvalidOutput",
    ]
    assert extract["attempts"][0]["retry_delay_seconds"] >= 20  # the provider's hint beat the 5 s backoff

    rows = list(ApiCost.objects.filter(instance_id=started.instance_id).order_by("id"))
    assert [(r.attempt, r.success) for r in rows] == [(2, False), (3, False), (4, True)]  # the 429 billed nothing
    reported = [
        usage_from_openai(blank["usage"], service="openai", model="gpt-4o-mini"),
        usage_from_openai(broken["usage"], service="openai", model="gpt-4o-mini"),
        real_answer_usage(fake_openai, 3),
    ]
    assert [(r.tokens_in, r.tokens_cached, r.tokens_out) for r in rows] == [
        (u.input_tokens, u.cached_input_tokens, u.output_tokens) for u in reported
    ]
    assert instance_cost(started.instance_id) == priced(*reported)
    assert instance_cost(started.instance_id).quantize(Decimal("0.01")) == priced(*reported).quantize(Decimal("0.01"))


def test_a_5xx_and_an_answer_without_facts_are_retried_and_the_answer_is_billed(
    openai_tenant: str, fake_openai: FakeOpenAI, drain
) -> None:
    shapeless = chat_completion('{"result": []}', prompt_tokens=500, completion_tokens=5)
    fake_openai.plan(CHAT, Planned(500, {"error": {"message": "server error"}}), Planned(200, shapeless))
    started = gong_ingest_start("acme", {"id": "1002"}, transcript=TRANSCRIPT)
    drain()
    assert get(started.instance_id).status()["status"] == "complete"
    rows = list(ApiCost.objects.filter(instance_id=started.instance_id).order_by("id"))
    assert [(r.attempt, r.success, r.metadata.get("error")) for r in rows] == [
        (2, False, "FactsMalformed"),
        (3, True, None),
    ]
    assert instance_cost(started.instance_id) == priced(
        usage_from_openai(shapeless["usage"], service="openai", model="gpt-4o-mini"), real_answer_usage(fake_openai, 2)
    )


def test_the_price_table_wins_over_the_default_prices(openai_tenant: str, fake_openai: FakeOpenAI, drain) -> None:
    price_upsert(
        service="openai",
        model="gpt-4o-mini",
        effective_from=datetime(2025, 1, 1, tzinfo=UTC),
        input_per_million="1.00",
        output_per_million="2.00",
        cached_input_per_million="0.50",
    )
    started = gong_ingest_start("acme", {"id": "1003"}, transcript=TRANSCRIPT)
    drain()
    usage = real_answer_usage(fake_openai, 0)
    expected = (Decimal(usage.input_tokens) * Decimal("1.00") + Decimal(usage.output_tokens) * Decimal("2.00")) / 10**6
    assert instance_cost(started.instance_id) == expected.quantize(Decimal("0.000001"))


def test_a_fail_budget_stops_the_extraction_before_any_spend(
    openai_tenant: str, fake_openai: FakeOpenAI, drain
) -> None:
    budget_upsert(scope="tenant", key="acme", period="day", limit="0.000010", policy="fail")
    started = gong_ingest_start("acme", {"id": "1004"}, transcript=TRANSCRIPT)
    drain()
    status = get(started.instance_id).status()
    assert status["status"] == "errored" and status["error"]["name"] == "BudgetExceeded"
    assert "budget tenant:acme" in status["error"]["message"]
    assert fake_openai.count(CHAT) == 0
    budget = Budget.objects.get(key="acme")
    assert (budget.spent, budget.reserved) == (0, 0)


def _approval_pending(openai_tenant: str, drain) -> tuple[str, ApprovalRequest]:
    budget_upsert(scope="tenant", key="acme", period="month", limit="0", policy="approval")
    started = gong_ingest_start("acme", {"id": "1005"}, transcript=TRANSCRIPT)
    drain(max_turns=50)  # bounded: a breach that failed to pause would re-run without end
    assert get(started.instance_id).status()["status"] == "paused"
    request = ApprovalRequest.objects.get(instance_id=started.instance_id, state="pending")
    assert request.step_name.startswith("llm-extract")
    return started.instance_id, request


def test_an_approval_budget_pauses_the_call_until_an_operator_grants_more(
    openai_tenant: str, fake_openai: FakeOpenAI, drain
) -> None:
    instance_id, request = _approval_pending(openai_tenant, drain)
    assert fake_openai.count(CHAT) == 0
    approval_answer(approval_id=request.id, approved=True, values={"amount": "0.05"}, actor="operator")
    drain()
    assert get(instance_id).status()["status"] == "complete"
    assert fake_openai.count(CHAT) == 1
    budget = Budget.objects.get(key="acme")
    assert budget.spent == instance_cost(instance_id) > 0 and budget.reserved == 0


def test_an_operator_who_denies_the_approval_ends_the_call_without_spending(
    openai_tenant: str, fake_openai: FakeOpenAI, drain
) -> None:
    instance_id, request = _approval_pending(openai_tenant, drain)
    approval_answer(approval_id=request.id, approved=False, comment="not this month", actor="operator")
    drain()
    status = get(instance_id).status()
    assert status["status"] == "errored" and "denied" in status["error"]["message"]
    assert fake_openai.count(CHAT) == 0 and instance_cost(instance_id) == 0


def test_the_reservation_covers_the_whole_prompt_and_the_longest_answer() -> None:
    from ingest.pipelines.selectors import LLMConfig
    from ingest.workflows.providers import MAX_OUTPUT_TOKENS, ClientExtractor, reservation

    extractor = ClientExtractor(LLMConfig(provider="openai", base_url="http://127.0.0.1:9/v1", model="gpt-4o-mini"))
    estimate = reservation(extractor, TRANSCRIPT, at=datetime.now(UTC))
    prompt = tokens(SYSTEM_PROMPT) + tokens(TRANSCRIPT)
    worst = cost_for(
        Usage("openai", "gpt-4o-mini", prompt + 16, 0, MAX_OUTPUT_TOKENS), DEFAULT_PRICES, datetime.now(UTC)
    )
    assert estimate == worst
