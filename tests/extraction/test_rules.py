from __future__ import annotations

import pytest

from ingest.demo.corpus import demo_calls, demo_opportunities
from ingest.extraction import Fact, FactsMalformed, facts_from_result
from ingest.extraction.rules import RuleExtractor
from ingest.sources.llm import LLMResult

pytestmark = pytest.mark.pure

TRANSCRIPT = """Maya Chen: Thanks for making time today, Dana. Let's recap the pain points in forecasting.
Dana Whitfield: We have about 80 sales reps today and plan to hire more by Q3 2025.
Dana Whitfield: We're also looking at Clari, their quote came in around $42,000 a year.
Maya Chen: Understood. For 100 seats our annual price would be $48k.
Dana Whitfield: Our budget for this is €1.2M, and our CFO needs to sign off on anything above that.
Dana Whitfield: We want to go live by July 1st. Procurement will review the MSA before we sign on June 15, 2025.
Maya Chen: I'll send the revised proposal by Friday. Next step is a technical review on March 3."""

EXPECTED = [
    ("Acme", "deal_stage", "Needs Analysis"),
    ("Acme", "headcount", "80"),
    ("Acme", "date_mentioned", "Q3 2025"),
    ("Clari", "quoted_price", "USD 42000"),
    ("Acme", "competitor_mentioned", "Clari"),
    ("Acme", "deal_amount", "USD 48000"),
    ("Acme", "seat_count", "100"),
    ("Acme", "budget", "EUR 1200000"),
    ("Acme", "approver", "CFO"),
    ("Acme", "go_live_date", "July 1"),
    ("Acme", "close_date", "2025-06-15"),
    ("Acme", "deal_stage", "Negotiation/Review"),
    ("Acme", "deal_stage", "Proposal/Price Quote"),
    ("Maya Chen", "commitment", "send the revised proposal by Friday"),
    ("Acme", "meeting_date", "March 3"),
    ("Acme", "next_step", "a technical review on March 3"),
]


def triples(result: LLMResult) -> list[tuple[str, str, str]]:
    return [(f.subject, f.predicate, f.object) for f in facts_from_result(result)]


def test_it_extracts_exactly_the_expected_facts_from_a_fixed_transcript() -> None:
    assert triples(RuleExtractor().extract(TRANSCRIPT, subject="Acme")) == EXPECTED


def test_each_fact_quotes_its_sentence_as_evidence() -> None:
    facts = facts_from_result(RuleExtractor().extract(TRANSCRIPT, subject="Acme"))

    budget = next(f for f in facts if f.predicate == "budget")
    assert budget.evidence == "Our budget for this is €1.2M, and our CFO needs to sign off on anything above that."
    assert 0 < budget.confidence <= 1


def test_the_result_has_the_llm_shape_with_zero_tokens() -> None:
    result = RuleExtractor().extract(TRANSCRIPT, subject="Acme")

    assert set(result.data) == {"facts"} and result.model == "rules-v1"
    assert result.usage.input_tokens == 0 and result.usage.output_tokens == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Our budget is 250,000 dollars.", "USD 250000"),
        ("Our budget is £75k.", "GBP 75000"),
        ("Our budget is $1.5 million.", "USD 1500000"),
        ("Our budget is 99.50 EUR.", "EUR 99.50"),
    ],
)
def test_amounts_are_normalised_with_their_currency(text: str, expected: str) -> None:
    assert triples(RuleExtractor().extract(text)) == [("deal", "budget", expected)]


def test_competitors_come_from_the_configured_list() -> None:
    result = RuleExtractor(competitors=["Acme CRM"]).extract("They also trialled acme crm and Clari.")

    assert ("deal", "competitor_mentioned", "Acme CRM") in triples(result)
    assert all(obj != "Clari" for _, _, obj in triples(result))


def test_text_without_facts_yields_none() -> None:
    assert triples(RuleExtractor().extract("Sounds good, talk then.")) == []


def test_it_is_deterministic_over_the_demo_corpus() -> None:
    extractor = RuleExtractor()
    for call in demo_calls(count=3):
        first = extractor.extract(call.transcript_text(), subject=call.account)
        assert first == extractor.extract(call.transcript_text(), subject=call.account)
        predicates = {f.predicate for f in facts_from_result(first)}
        assert {
            "budget",
            "competitor_mentioned",
            "commitment",
            "next_step",
            "close_date",
        } <= predicates


def test_it_reads_salesforce_free_text_fields() -> None:
    opp = demo_opportunities(count=1)[0]

    predicates = {
        f.predicate
        for f in facts_from_result(RuleExtractor().extract(f"{opp.description}\n{opp.notes}", subject=opp.account))
    }

    assert {"seat_count", "budget", "approver", "commitment", "next_step"} <= predicates


def test_llm_output_is_cleaned_into_facts() -> None:
    data = {
        "facts": [
            {
                "subject": "Acme",
                "predicate": "Deal Stage",
                "object": "Closed Won",
                "confidence": "1.4",
                "evidence": "signed",
            },
            {"subject": "Acme", "predicate": "budget", "object": ""},
            "not a fact",
            {"subject": "Acme", "predicate": "deal_stage", "object": "Closed Won", "confidence": 0.2},
        ]
    }

    assert facts_from_result(LLMResult(data=data)) == [Fact("Acme", "deal_stage", "Closed Won", 1.0, "signed")]


def test_output_without_a_facts_list_is_retryable() -> None:
    with pytest.raises(FactsMalformed) as caught:
        facts_from_result(LLMResult(data={"result": []}, model="gpt-4o-mini"))

    assert caught.value.retryable and "'facts'" in str(caught.value)


def test_fact_keys_are_stable_and_source_specific() -> None:
    fact = Fact("Acme", "budget", "USD 1", 0.9)

    assert fact.key("gong:1") == Fact("acme", "budget", "usd 1", 0.1).key("gong:1")
    assert fact.key("gong:1") != fact.key("gong:2")


def test_the_demo_corpus_is_deterministic_per_seed() -> None:
    assert demo_calls(seed=3, count=4) == demo_calls(seed=3, count=4)
    assert demo_calls(seed=3, count=4) != demo_calls(seed=4, count=4)
    assert all(len(o.id) == 18 for o in demo_opportunities(count=5))
