"""gong-ingest end to end through the real engine against the fake Gong and OpenAI servers."""

from __future__ import annotations

import pytest

from ingest.engine import get
from ingest.engine.models import ApiCost, DeadLetter, Instance
from ingest.pipelines.models import Fact, SignalEvaluation, SourceAuthority
from ingest.pipelines.services import connection_upsert, keyword_list_set
from ingest.workflows import gong_ingest_start
from tests.fakes import FakeGong, FakeOpenAI, Planned
from tests.fakes.llm import CHAT

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def step_names(instance_id: str) -> list[str]:
    return [s["name"] for s in get(instance_id).status()["steps"]]


def test_a_webhook_call_is_fetched_extracted_and_persisted_one_fact_per_step(
    gong_tenant: str, fake_gong: FakeGong, fake_openai: FakeOpenAI, drain
) -> None:
    call = fake_gong.calls[0]
    started = gong_ingest_start(gong_tenant, {"id": call.id, "title": call.title})
    assert started.created and started.instance_id == f"gong-acme-{call.id}"
    drain()
    status = get(started.instance_id).status()
    assert status["status"] == "complete", status["error"]
    out = status["output"]
    assert out["facts"] > 5
    names = step_names(started.instance_id)
    assert names[:4] == ["search-attributes", "fetch-transcript", "keyword-prefilter", "llm-extract"]
    assert names[4:-2] == [f"persist-facts-{i}" for i in range(out["facts"])]
    assert names[-2:] == ["schedule-embeddings", "emit-signal-eval"]
    assert fake_openai.count(CHAT) == 1
    facts = Fact.objects.filter(tenant="acme", source_ref=f"gong:call:{call.id}")
    assert {f.id for f in facts} == set(out["fact_ids"])
    assert {f.source_authority for f in facts} == {SourceAuthority.GONG_CALL}
    assert facts.filter(subject="Acme Logistics", predicate="budget").exists()
    evaluation = SignalEvaluation.objects.get(instance_id=started.instance_id)
    assert evaluation.fact_ids == out["fact_ids"] and evaluation.fact_count == out["facts"]


def test_a_call_without_keyword_hits_is_engagement_only_and_calls_no_llm(
    openai_tenant: str, fake_openai: FakeOpenAI, drain
) -> None:
    keyword_list_set(tenant="acme", keywords=["blockchain"])
    text = "Maya Chen: Just checking in.\nSam Okafor: All quiet here, talk next month."
    started = gong_ingest_start("acme", {"id": "42", "title": "Acme Logistics <> Northwind: check-in"}, transcript=text)
    drain()
    status = get(started.instance_id).status()
    assert status["status"] == "complete"
    assert step_names(started.instance_id) == ["search-attributes", "keyword-prefilter", "insert-engagement-only"]
    assert status["output"]["engagement_only"] is True
    fact = Fact.objects.get(tenant="acme", source_ref="gong:call:42")
    assert (fact.predicate, fact.confidence, fact.source_authority) == ("engagement", 0.2, "GongEngagement")
    assert fake_openai.count(CHAT) == 0


def test_a_tenant_without_a_keyword_list_extracts_every_call(fake_openai: FakeOpenAI, drain) -> None:
    text = "Dana Whitfield: Our budget is $50k.\nMaya Chen: Thanks."
    started = gong_ingest_start("nolist", {"id": "7"}, transcript=text)
    drain()
    assert get(started.instance_id).status()["status"] == "complete"
    assert "llm-extract" in step_names(started.instance_id)
    assert Fact.objects.get(tenant="nolist", predicate="budget").object == "USD 50000"


def test_a_redelivered_call_hits_the_duplicate_id_and_is_already_processed(openai_tenant: str, drain) -> None:
    text = "Dana Whitfield: Our budget is $50k for pricing.\nMaya Chen: Noted."
    first = gong_ingest_start("acme", {"id": "99"}, transcript=text)
    drain()
    again = gong_ingest_start("acme", {"id": "99"}, transcript=text)
    assert first.created and not again.created and again.instance_id == first.instance_id
    assert Instance.objects.filter(workflow="gong-ingest").count() == 1


def test_a_malformed_transcript_fails_once_without_retrying_and_dead_letters(openai_tenant: str, drain) -> None:
    started = gong_ingest_start("acme", {"id": "13"}, transcript="<<export failed>>")
    drain()
    status = get(started.instance_id).status()
    assert status["status"] == "errored"
    assert "malformed" in status["error"]["message"] and "replay" in status["error"]["message"]
    prefilter = status["steps"][1]
    assert prefilter["name"] == "keyword-prefilter" and len(prefilter["attempts"]) == 1
    assert DeadLetter.objects.get(instance_id=started.instance_id).step_name == "keyword-prefilter"


def test_gong_5xx_and_429_while_fetching_the_transcript_are_retried_by_the_engine(
    gong_tenant: str, fake_gong: FakeGong, drain
) -> None:
    fake_gong.plan(
        "POST /v2/calls/transcript",
        Planned(503, {"errors": ["unavailable"]}),
        Planned(429, {"errors": ["slow down"]}, {"Retry-After": "45"}),
    )
    call = fake_gong.calls[1]
    started = gong_ingest_start("acme", {"id": call.id, "title": call.title})
    drain()
    status = get(started.instance_id).status()
    assert status["status"] == "complete", status["error"]
    fetch = status["steps"][1]
    assert fetch["name"] == "fetch-transcript"
    assert [a["ok"] for a in fetch["attempts"]] == [False, False, True]
    assert fetch["attempts"][1]["retry_delay_seconds"] >= 45  # Gong's Retry-After, not the 20 s backoff


def test_an_llm_key_that_is_refused_ends_the_step_without_retrying(
    openai_tenant: str, fake_openai: FakeOpenAI, drain
) -> None:
    fake_openai.plan(CHAT, Planned(401, {"error": {"message": "Incorrect API key provided"}}))
    started = gong_ingest_start("acme", {"id": "5"}, transcript="Dana: Our budget is $50k.")
    drain()
    status = get(started.instance_id).status()
    assert status["status"] == "errored"
    # Not retried, and named by what failed: the dead letters group by it.
    assert status["error"]["name"] == "ingest.sources.llm.common.LLMAuthError"
    assert "API key" in status["error"]["message"]
    assert (
        DeadLetter.objects.get(instance_id=started.instance_id).error_name == "ingest.sources.llm.common.LLMAuthError"
    )
    assert fake_openai.count(CHAT) == 1
    assert not ApiCost.objects.filter(instance_id=started.instance_id).exists()  # a 401 bills nothing


def test_a_permanent_gong_failure_dead_letters_under_gong_s_error_class_not_non_retryable(
    gong_tenant: str, fake_gong: FakeGong, drain
) -> None:
    fake_gong.plan("POST /v2/calls/transcript", Planned(403, {"errors": ["scope missing"]}))
    call = fake_gong.calls[2]
    started = gong_ingest_start("acme", {"id": call.id, "title": call.title})
    drain()
    status = get(started.instance_id).status()
    assert status["status"] == "errored"
    assert status["error"]["name"] == "ingest.sources.gong.GongAuthError"
    fetch = status["steps"][1]
    assert fetch["name"] == "fetch-transcript" and len(fetch["attempts"]) == 1  # a 403 is not retried
    letter = DeadLetter.objects.get(instance_id=started.instance_id)
    assert (letter.step_name, letter.error_name) == ("fetch-transcript", "ingest.sources.gong.GongAuthError")
    assert "access key" in letter.error_message


def test_an_llm_model_without_a_price_ends_the_step_under_the_pricing_error_s_name(
    openai_tenant: str, fake_openai: FakeOpenAI, drain
) -> None:
    connection_upsert(
        tenant="acme",
        kind="llm",
        base_url=f"{fake_openai.url}/v1",
        secret="sk-fake",
        options={"provider": "openai", "model": "gpt-unpriced-9", "service": "openai"},
    )
    started = gong_ingest_start("acme", {"id": "6"}, transcript="Dana: Our budget is $50k.")
    drain()
    status = get(started.instance_id).status()
    assert status["status"] == "errored"
    assert status["error"]["name"] == "ingest.pipelines.pricing.PriceNotFound"
    assert status["error"]["message"].startswith("cannot reserve budget for step 'llm-extract' of ")
    letter = DeadLetter.objects.get(instance_id=started.instance_id)
    assert (letter.step_name, letter.error_name) == ("llm-extract", "ingest.pipelines.pricing.PriceNotFound")
    assert fake_openai.count(CHAT) == 0  # refused before anything was spent


def test_the_first_fact_step_to_run_writes_the_later_facts_and_each_step_records_its_own() -> None:
    """A run whose `persist-facts-0` is already recorded (here: mocked), as after a crash that
    lost the later completions: `persist-facts-1` writes its fact and the next ones in one batch,
    at their own ordinals, and every step's result is its own fact's answer."""
    from ingest.engine.models import Step
    from ingest.engine.testing import introspect_workflow, run_workflow
    from ingest.workflows.gong import gong_params

    items = [
        {"subject": "Acme", "predicate": p, "object": o, "confidence": 0.9, "evidence": "said", "authority": "GongCall"}
        for p, o in (("budget", "USD 1"), ("competitor_mentioned", "Clari"), ("budget", "USD 2"))
    ]
    recorded = {"id": "recorded-before", "action": "stored", "valid": True, "superseded": []}
    with introspect_workflow("gong-ingest") as wf:
        wf.mock_step_result("llm-extract", {"facts": items, "model": "m", "service": "openai"})
        wf.mock_step_result("persist-facts-0", recorded)
        params = gong_params(
            {"call_id": "77", "title": "Acme sync", "account": "Acme"}, "Rep: we spend USD 2 with Clari"
        )
        status = run_workflow("gong-ingest", params=params, tenant="acme")
    assert status["status"] == "complete", status["error"]
    facts = {f.ordinal: f for f in Fact.objects.filter(tenant="acme", source_ref="gong:call:77")}
    assert sorted(facts) == [1, 2]  # the mocked step's fact was not written again
    assert status["output"]["fact_ids"] == ["recorded-before", facts[1].id, facts[2].id]
    results = dict(Step.objects.filter(instance_id=status["id"]).values_list("name", "result"))
    assert results["persist-facts-0"] == recorded
    assert results["persist-facts-1"] == {"id": facts[1].id, "action": "stored", "valid": True, "superseded": []}
    assert results["persist-facts-2"] == {"id": facts[2].id, "action": "inserted", "valid": True, "superseded": []}
