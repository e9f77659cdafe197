"""gong-ingest end to end through the real engine against the fake Gong and OpenAI servers."""

from __future__ import annotations

import pytest

from ingest.engine import get
from ingest.engine.models import ApiCost, DeadLetter, Instance
from ingest.models import Fact, SignalEvaluation, SourceAuthority
from ingest.services import keyword_list_set
from ingest.workflows import gong_ingest_start
from tests.fakes import FakeGong, FakeOpenAI, Planned
from tests.fakes.llm import CHAT, chat_completion

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def step_names(instance_id: str) -> list[str]:
    return [s["name"] for s in get(instance_id).status()["steps"]]


def test_a_webhook_call_is_fetched_extracted_and_persisted_one_fact_per_step(
        gong_tenant: str, fake_gong: FakeGong, fake_openai: FakeOpenAI, drain) -> None:
    call = fake_gong.calls[0]
    started = gong_ingest_start(gong_tenant, {"id": call.id, "title": call.title})
    assert started.created and started.instance_id == f"gong-acme-{call.id}"
    drain()
    status = get(started.instance_id).status()
    assert status["status"] == "complete", status["error"]
    out = status["output"]
    assert out["facts"] > 5
    names = step_names(started.instance_id)
    assert names[:3] == ["fetch-transcript", "keyword-prefilter", "llm-extract"]
    assert names[3:-2] == [f"persist-facts-{i}" for i in range(out["facts"])]
    assert names[-2:] == ["schedule-embeddings", "emit-signal-eval"]
    assert fake_openai.count(CHAT) == 1
    facts = Fact.objects.filter(tenant="acme", source_ref=f"gong:call:{call.id}")
    assert {f.id for f in facts} == set(out["fact_ids"])
    assert {f.source_authority for f in facts} == {SourceAuthority.GONG_CALL}
    assert facts.filter(subject="Acme Logistics", predicate="budget").exists()
    evaluation = SignalEvaluation.objects.get(instance_id=started.instance_id)
    assert evaluation.fact_ids == out["fact_ids"] and evaluation.fact_count == out["facts"]
