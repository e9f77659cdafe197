"""salesforce-ingest end to end against the fake Salesforce org and OpenAI-compatible API."""

from __future__ import annotations

import pytest

from ingest.demo.seed import opportunity_record
from ingest.engine import get
from ingest.pipelines.models import Fact
from ingest.workflows import salesforce_ingest_start
from ingest.workflows.salesforce import sfdc_instance_id, translate_fields, version_of
from tests.fakes import FakeOpenAI, FakeSalesforce
from tests.fakes.llm import CHAT
from tests.fakes.salesforce import RECORD_ROUTE, TOKEN_ROUTE, sf_error

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def names(instance_id: str) -> list[str]:
    return [s["name"] for s in get(instance_id).status()["steps"]]


def test_structured_fields_become_facts_with_their_authority_and_only_free_text_reaches_the_llm(
    openai_tenant: str, fake_salesforce: FakeSalesforce, fake_openai: FakeOpenAI, drain
) -> None:
    opp = fake_salesforce.opportunities[0]
    record = {**opportunity_record(opp), "Competitor__c": "Clari"}
    started = salesforce_ingest_start("acme", object_id=opp.id, record=record)
    assert started.instance_id == f"sfdc-acme-Opportunity-{opp.id}-v{version_of(record['LastModifiedDate'])}"
    drain()
    status = get(started.instance_id).status()
    assert status["status"] == "complete", status["error"]
    assert names(started.instance_id)[:3] == ["search-attributes", "translate-fields", "llm-extract"]
    facts = {(f.predicate, f.source_authority): f for f in Fact.objects.filter(source_ref=f"sfdc:Opportunity:{opp.id}")}
    assert facts[("deal_stage", "SfdcOpportunityStage")].object == opp.stage_name
    assert facts[("deal_amount", "SfdcOpportunityStage")].object == f"USD {opp.amount:.0f}"
    assert facts[("close_date", "SfdcOpportunityStage")].object == opp.close_date.isoformat()
    assert facts[("industry", "SfdcCustomField")].object == opp.industry
    assert facts[("competitor", "SfdcCustomField")].object == "Clari"
    assert any(a == "SfdcFreeText" for _, a in facts)
    assert all(f.subject == opp.account for (_, a), f in facts.items() if a != "SfdcFreeText")
    assert fake_openai.count(CHAT) == 1
    user = fake_openai.requests_to(CHAT)[0].json()["messages"][-1]["content"]
    assert opp.notes in user and opp.stage_name not in user  # structured fields never go to the LLM


def test_a_record_without_free_text_never_calls_the_llm(
    openai_tenant: str, fake_salesforce: FakeSalesforce, fake_openai: FakeOpenAI, drain
) -> None:
    opp = fake_salesforce.opportunities[1]
    record = {**opportunity_record(opp), "Description": None, "Notes__c": ""}
    started = salesforce_ingest_start("acme", object_id=opp.id, record=record)
    drain()
    assert get(started.instance_id).status()["status"] == "complete"
    assert "llm-extract" not in names(started.instance_id)
    assert fake_openai.count(CHAT) == 0


def test_a_change_without_a_record_reads_it_refreshing_an_expired_token_and_waiting_out_the_api_limit(
    sfdc_tenant: str, fake_salesforce: FakeSalesforce, drain
) -> None:
    opp = fake_salesforce.opportunities[2]
    first = salesforce_ingest_start("acme", object_id=opp.id, version="1")
    drain()
    assert get(first.instance_id).status()["status"] == "complete"
    fake_salesforce.expire_tokens()
    fake_salesforce.plan(RECORD_ROUTE, sf_error(403, "REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded."))
    second = salesforce_ingest_start("acme", object_id=opp.id, version="2")
    drain()
    status = get(second.instance_id).status()
    assert status["status"] == "complete", status["error"]
    fetch = status["steps"][1]
    assert fetch["name"] == "fetch-record"
    assert [a["ok"] for a in fetch["attempts"]] == [False, True]
    assert fetch["attempts"][0]["retry_delay_seconds"] >= 3600  # the limit resets later: no hammering
    assert fake_salesforce.count(TOKEN_ROUTE) == 2  # one refresh after the session expired


def test_the_same_change_twice_is_already_processed_and_a_later_change_is_a_new_instance(openai_tenant: str) -> None:
    opp_record = {
        "Id": "006A",
        "Name": "X",
        "Account": {"Name": "Acme"},
        "LastModifiedDate": "2025-03-03T09:00:00.000Z",
    }
    first = salesforce_ingest_start("acme", object_id="006A", record=opp_record)
    again = salesforce_ingest_start("acme", object_id="006A", record=opp_record)
    later = salesforce_ingest_start(
        "acme", object_id="006A", record={**opp_record, "LastModifiedDate": "2025-03-04T10:00:00.000Z"}
    )
    assert first.created and not again.created and later.created
    assert later.instance_id == "sfdc-acme-Opportunity-006A-v20250304100000000"


@pytest.mark.pure
def test_instance_ids_stay_valid_for_long_versions() -> None:
    long_id = sfdc_instance_id("a-very-long-tenant-name-" * 2, "Opportunity", "006" + "x" * 15, "v" * 200)
    assert len(long_id) <= 100


@pytest.mark.pure
def test_the_translation_is_deterministic_and_skips_empty_fields() -> None:
    record = {
        "StageName": "Prospecting",
        "Amount": "1234.50",
        "CurrencyIsoCode": "EUR",
        "Type": "",
        "Priority__c": "High",
        "Notes__c": "free text",
    }
    items = translate_fields(record, subject="Initech")
    assert [(i["predicate"], i["object"]) for i in items] == [
        ("deal_stage", "Prospecting"),
        ("deal_amount", "EUR 1234.50"),
        ("priority", "High"),
    ]
    assert translate_fields(record, subject="Initech") == items
