"""gong-ingest and salesforce-ingest tag their instances (version 2) with what an operator finds a
run by, and the instances list finds it; an instance started on version 1 replays its recorded
steps without the new one."""

from __future__ import annotations

import pytest

from ingest.demo.seed import opportunity_record
from ingest.engine import get
from ingest.engine.models import InstanceAttributes
from ingest.workflows import gong_ingest_start, salesforce_ingest_start
from ingest.workflows.gong import GongIngest
from ingest.workflows.salesforce import SalesforceIngest
from tests.fakes import FakeGong, FakeOpenAI, FakeSalesforce, Planned
from tests.fakes.llm import CHAT
from tests.fakes.salesforce import RECORD_ROUTE, account_id, sf_error
from tests.personas import listed, operator_client

pytestmark = [pytest.mark.db, pytest.mark.django_db]

TEXT = "Dana Whitfield: Our budget is $50k for pricing.\nMaya Chen: Noted, I will send the proposal."


def attributes(instance_id: str) -> dict[str, str] | None:
    row = InstanceAttributes.objects.filter(instance_id=instance_id).first()
    return None if row is None else row.attributes


def step_names(instance_id: str) -> list[str]:
    return [s["name"] for s in get(instance_id).status()["steps"]]


def test_a_call_is_tagged_with_its_call_id_and_account_and_the_operator_finds_it_by_either(
    openai_tenant: str, drain
) -> None:
    acme = gong_ingest_start(
        "acme",
        {"id": "4711", "title": "Acme Logistics <> Northwind: Demo", "account": "Acme Logistics"},
        transcript=TEXT,
    )
    other = gong_ingest_start("acme", {"id": "4712", "account": "Hooli"}, transcript=TEXT)
    drain()
    assert get(acme.instance_id).status()["status"] == "complete"
    assert step_names(acme.instance_id)[0] == "search-attributes"
    assert attributes(acme.instance_id) == {"call_id": "4711", "account": "acme-logistics"}
    assert attributes(other.instance_id) == {"call_id": "4712", "account": "hooli"}

    operator = operator_client()
    assert listed(operator, "attr=call_id:4711") == [acme.instance_id]
    assert listed(operator, "attr=account:acme-logistics") == [acme.instance_id]
    assert listed(operator, "workflow=gong-ingest&sort=attr.account") == [acme.instance_id, other.instance_id]
    assert listed(operator, "workflow=gong-ingest&sort=-attr.account") == [other.instance_id, acme.instance_id]
    assert listed(operator, "attr=call_id:4711+account:hooli") == []


def test_a_webhook_call_without_an_account_is_tagged_before_its_fetch_and_never_with_its_title(
    gong_tenant: str, fake_gong: FakeGong, drain
) -> None:
    call = fake_gong.calls[0]
    fake_gong.plan("POST /v2/calls/transcript", Planned(503, {"errors": ["unavailable"]}))
    started = gong_ingest_start(gong_tenant, {"id": call.id, "title": call.title})
    drain(advance_clock=False)  # the fetch failed once and waits for its retry
    assert get(started.instance_id).status()["status"] == "waiting"
    assert attributes(started.instance_id) == {"call_id": call.id}  # findable while Gong fails
    drain()
    assert get(started.instance_id).status()["status"] == "complete"
    assert attributes(started.instance_id) == {"call_id": call.id}


def test_a_call_started_on_version_1_replays_its_recorded_steps_without_the_new_one(
    openai_tenant: str, fake_openai: FakeOpenAI, drain, monkeypatch
) -> None:
    fake_openai.plan(CHAT, Planned(429, {"error": {"message": "Rate limit"}}, {"Retry-After": "20"}))
    monkeypatch.setattr(GongIngest, "version", 1)
    started = gong_ingest_start("acme", {"id": "1001", "account": "Acme Logistics"}, transcript=TEXT)
    monkeypatch.setattr(GongIngest, "version", 2)  # the deploy, while the instance is in flight
    drain(advance_clock=False)
    status = get(started.instance_id).status()
    assert status["status"] == "waiting"  # llm-extract waits out the 429: replayed from the top next turn
    assert [s["name"] for s in status["steps"]] == ["keyword-prefilter", "llm-extract"]

    drain()
    status = get(started.instance_id).status()
    assert status["status"] == "complete", status["error"]
    names = [s["name"] for s in status["steps"]]
    assert names[:2] == ["keyword-prefilter", "llm-extract"] and "search-attributes" not in names
    assert attributes(started.instance_id) is None
    assert started.instance_id in listed(operator_client(), "workflow=gong-ingest")


def test_a_record_is_tagged_with_its_object_and_account_and_the_operator_finds_it(
    openai_tenant: str, fake_salesforce: FakeSalesforce, drain
) -> None:
    opp = fake_salesforce.opportunities[0]
    started = salesforce_ingest_start("acme", object_id=opp.id, record=opportunity_record(opp))
    drain()
    assert get(started.instance_id).status()["status"] == "complete"
    assert step_names(started.instance_id)[:2] == ["search-attributes", "translate-fields"]
    slug = opp.account.lower().replace(" ", "-")
    assert attributes(started.instance_id) == {"object_type": "Opportunity", "object_id": opp.id, "account": slug}

    operator = operator_client()
    assert listed(operator, f"attr=object_id:{opp.id}") == [started.instance_id]
    assert listed(operator, f"attr=object_type:Opportunity+account:{slug}") == [started.instance_id]


def test_a_change_without_its_record_is_tagged_first_and_gets_its_account_once_the_record_is_read(
    sfdc_tenant: str, fake_salesforce: FakeSalesforce, drain
) -> None:
    opp = fake_salesforce.opportunities[2]
    fake_salesforce.plan(RECORD_ROUTE, sf_error(403, "REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded."))
    started = salesforce_ingest_start("acme", object_id=opp.id, version="1")
    drain(advance_clock=False)  # the read waits an hour for the org's API limit
    assert attributes(started.instance_id) == {"object_type": "Opportunity", "object_id": opp.id}
    drain()
    assert get(started.instance_id).status()["status"] == "complete"
    assert step_names(started.instance_id)[:4] == [
        "search-attributes",
        "fetch-record",
        "search-attributes",
        "translate-fields",
    ]
    assert attributes(started.instance_id) == {
        "object_type": "Opportunity",
        "object_id": opp.id,
        "account": opp.account.lower().replace(" ", "-"),
        "account_id": account_id(opp.account),
    }
    assert listed(operator_client(), f"attr=account_id:{account_id(opp.account)}") == [started.instance_id]


def test_a_change_started_on_version_1_replays_its_failed_read_without_the_new_steps(
    sfdc_tenant: str, fake_salesforce: FakeSalesforce, drain, monkeypatch
) -> None:
    opp = fake_salesforce.opportunities[2]
    fake_salesforce.plan(RECORD_ROUTE, sf_error(403, "REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded."))
    monkeypatch.setattr(SalesforceIngest, "version", 1)
    started = salesforce_ingest_start("acme", object_id=opp.id, version="1")
    monkeypatch.setattr(SalesforceIngest, "version", 2)
    drain(advance_clock=False)
    assert step_names(started.instance_id) == ["fetch-record"]
    drain()
    status = get(started.instance_id).status()
    assert status["status"] == "complete", status["error"]
    assert "search-attributes" not in [s["name"] for s in status["steps"]]
    assert attributes(started.instance_id) is None


def test_a_calls_tagging_and_prefilter_are_deferred_and_its_llm_step_and_the_ledger_are_unchanged(
    openai_tenant: str, drain, monkeypatch
) -> None:
    """The two steps before the LLM step write nothing outside this database, so their
    completions go with the group commit (docs/engine-contract.md, "Deferred checkpoints");
    the paid step stays immediate, and the call records the same steps as before."""
    from ingest.engine.runtime.execution import Execution

    deferred: dict[str, bool] = {}
    succeeded = Execution.succeeded

    def spy(self, p, ctx, started, result, *rest):
        deferred[p.label] = p.deferred
        return succeeded(self, p, ctx, started, result, *rest)

    monkeypatch.setattr(Execution, "succeeded", spy)
    started = gong_ingest_start("acme", {"id": "4713", "account": "Acme Logistics"}, transcript=TEXT)
    drain()
    assert get(started.instance_id).status()["status"] == "complete"
    assert deferred["search-attributes"] is True
    assert deferred["keyword-prefilter"] is True
    assert deferred["llm-extract"] is False
    assert step_names(started.instance_id)[:3] == ["search-attributes", "keyword-prefilter", "llm-extract"]
    assert attributes(started.instance_id) == {"call_id": "4713", "account": "acme-logistics"}
