"""Facts: deterministic ids, insert-or-supersede, embeddings and similarity search."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.extraction import Fact as Extracted
from ingest.models import Fact, FactEmbedding
from ingest.selectors import fact_similar
from ingest.services import fact_id_for, fact_insert_or_supersede
from ingest.workflows import gong_ingest_start
from ingest.workflows.providers import embedder

pytestmark = [pytest.mark.db, pytest.mark.django_db]
T0 = datetime(2025, 3, 3, 15, tzinfo=UTC)


def put(obj: str, *, source: str, authority: str = "GongCall", at: datetime = T0, predicate: str = "budget"):
    return fact_insert_or_supersede(tenant="acme", fact=Extracted("Acme", predicate, obj, 0.8, "said so"),
                                    source_ref=source, authority=authority, observed_at=at)


def test_the_same_fact_from_the_same_source_is_stored_once() -> None:
    first, again = put("USD 50000", source="gong:call:1"), put("USD 50000", source="gong:call:1")
    assert first.id == again.id == fact_id_for(tenant="acme", source_ref="gong:call:1",
                                               fact=Extracted("acme", "budget", "usd 50000", 0.1))
    assert (first.action, again.action) == ("inserted", "unchanged")  # budget: single-valued
    assert Fact.objects.count() == 1


def test_a_newer_observation_supersedes_an_older_one_whatever_the_processing_order() -> None:
    newer = put("USD 80000", source="gong:call:2", at=T0 + timedelta(days=7))
    older = put("USD 50000", source="gong:call:1", at=T0)  # a late redelivery of an older call
    assert (newer.action, older.action) == ("inserted", "outranked")
    assert Fact.objects.get(id=older.id).superseded_by_id == newer.id
    assert list(Fact.objects.filter(valid=True).values_list("object", flat=True)) == ["USD 80000"]


def test_salesforce_stage_fields_outrank_what_a_call_suggests() -> None:
    crm = put("Proposal/Price Quote", source="sfdc:Opportunity:006", authority="SfdcOpportunityStage",
              predicate="deal_stage")
    call = put("Negotiation/Review", source="gong:call:3", at=T0 + timedelta(days=1), predicate="deal_stage")
    assert call.action == "outranked" and Fact.objects.get(id=crm.id).valid


def test_multi_valued_predicates_accumulate() -> None:
    put("Clari", source="gong:call:1", predicate="competitor_mentioned")
    put("Outreach", source="gong:call:2", predicate="competitor_mentioned")
    assert Fact.objects.filter(valid=True).count() == 2


def test_a_second_call_supersedes_the_budget_of_the_first_through_the_pipeline(openai_tenant: str, drain) -> None:
    gong_ingest_start("acme", {"id": "1", "started": T0.isoformat(), "account": "Acme"},
                      transcript="Dana Whitfield: Our budget is $50k this year.")
    gong_ingest_start("acme", {"id": "2", "started": (T0 + timedelta(days=3)).isoformat(), "account": "Acme"},
                      transcript="Dana Whitfield: Good news, our budget is now $75k.")
    drain()
    budgets = {f.object: f for f in Fact.objects.filter(predicate="budget")}
    assert budgets["USD 75000"].valid and not budgets["USD 50000"].valid
    assert budgets["USD 50000"].superseded_by_id == budgets["USD 75000"].id


def test_committed_facts_are_embedded_and_found_by_similarity(openai_tenant: str, with_embeddings: None, drain) -> None:
    started = gong_ingest_start("acme", {"id": "8", "account": "Acme"}, transcript=(
        "Dana Whitfield: Our budget is $120k. We are also evaluating Clari.\n"
        "Maya Chen: I'll send the revised proposal by Friday."))
    drain()
    assert FactEmbedding.objects.filter(tenant="acme").count() == Fact.objects.filter(tenant="acme").count() > 2
    query = embedder().embed(["Acme competitor mentioned: Clari"]).vectors[0]
    best = fact_similar(tenant="acme", vector=query, limit=3)
    assert "Clari" in best[0].text and best[0].score > best[-1].score
    assert fact_similar(tenant="globex", vector=query) == []
    assert started.created


def test_within_one_call_the_later_statement_wins_whatever_order_the_facts_land_in(openai_tenant: str, drain) -> None:
    gong_ingest_start("acme", {"id": "11", "account": "Acme"}, transcript=(
        "Dana Whitfield: Our budget is $50k.\nSam Okafor: Correction, after the board meeting our budget is $65k."))
    drain()
    valid = Fact.objects.get(predicate="budget", valid=True)
    assert valid.object == "USD 65000"
    assert Fact.objects.get(predicate="budget", valid=False).superseded_by_id == valid.id
