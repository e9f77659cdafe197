"""url-classify's thresholds, each at its boundary, with the stages' results mocked: which
stages run after a stage proposed exactly 59/60, 64/65, 69/70 or 84/85."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.classify.models import DomainClassification, UrlClassification, UrlVector
from ingest.classify.services import domain_classification_upsert
from ingest.engine.testing import introspect_workflow, run_workflow
from tests.fakes.classify import FakeClassifyLLM

pytestmark = [pytest.mark.db, pytest.mark.django_db]

URL = "http://www.quiet-harbor.com/some/page"
NOT_FETCHED = {"fetched": False, "attempts": [], "cost": "0", "method": None}


def rules_said(confidence: int) -> dict[str, Any]:
    labels = {"domain_type": "corporate", "page_type": "landing"}
    return {"candidate": {"confidence": confidence, "labels": labels, "modifiers": []}, "rule": "x", "rules": ["x"]}


def run(rules_confidence: int, **params: Any) -> dict[str, Any]:
    with introspect_workflow("url-classify") as wf:
        wf.disable_sleeps()
        wf.mock_step_result("rules", rules_said(rules_confidence))
        wf.mock_step_result("similarity", {"ran": False})
        wf.mock_step_result("content", NOT_FETCHED)
        status = run_workflow("url-classify", params={"url": URL, **params}, tenant="acme")
    assert status["status"] == "complete", status["error"]
    return status


def step_names(status: dict[str, Any]) -> list[str]:
    return [s["name"] for s in status["steps"]]


@pytest.mark.parametrize(("confidence", "early_exit"), [(69, False), (70, True)])
def test_a_stage_at_70_ends_the_pipeline_and_69_goes_on(classify_env: str, confidence: int, early_exit: bool) -> None:
    status = run(confidence)
    output = status["output"]
    assert output["confidence"] == confidence and output["classification_source"] == "rules"
    if early_exit:
        assert output["stages_run"] == ["cache", "rules"]
        assert "content" not in step_names(status)
    else:
        assert output["stages_run"] == ["cache", "rules", "content"]  # similarity mocked as not run


@pytest.mark.parametrize(("confidence", "llm"), [(64, True), (65, False)])
def test_below_65_the_llm_verifies_and_at_65_it_does_not(
    classify_env: str, fake_llm: FakeClassifyLLM, confidence: int, llm: bool
) -> None:
    status = run(confidence)
    output = status["output"]
    assert ("llm" in output["stages_run"]) is llm
    assert (fake_llm.count() > 0) is llm
    if llm:
        assert output["classification_source"] == "llm" and output["round"] >= 1
        assert "llm-verify-1" in step_names(status)
    else:
        assert output["classification_source"] == "rules" and output["round"] == 0


@pytest.mark.parametrize(("confidence", "hit"), [(59, False), (60, True)])
def test_a_cached_domain_classification_is_reused_from_60(classify_env: str, confidence: int, hit: bool) -> None:
    domain_classification_upsert(tenant="acme", host="quiet-harbor.com", confidence=confidence,
                                 labels={"domain_type": "saas", "channel_bucket": "direct"}, modifiers=[],
                                 source="llm")  # fmt: skip
    with introspect_workflow("url-classify") as wf:
        wf.mock_step_result("rules", rules_said(72))
        status = run_workflow("url-classify", params={"url": URL}, tenant="acme")
    output = status["output"]
    if hit:
        assert output["stages_run"] == ["cache"] and output["classification_source"] == "cache"
        assert (output["domain_type"], output["confidence"], output["cost_usd"]) == ("saas", 60, 0.0)
        assert step_names(status) == ["search-attributes", "cache-check", "store-classification"]
    else:
        assert output["stages_run"] == ["cache", "rules"] and output["classification_source"] == "rules"


def test_a_cache_hit_is_per_tenant(classify_env: str) -> None:
    domain_classification_upsert(tenant="other", host="quiet-harbor.com", confidence=90,
                                 labels={"domain_type": "saas"}, modifiers=[], source="llm")  # fmt: skip
    status = run(72)
    assert status["output"]["classification_source"] == "rules"


@pytest.mark.parametrize(("confidence", "fed"), [(84, False), (85, True)])
def test_from_85_the_url_feeds_the_index_and_the_domain_cache(classify_env: str, confidence: int, fed: bool) -> None:
    status = run(confidence)
    assert ("index-feedback" in step_names(status)) is fed
    assert UrlVector.objects.filter(tenant="acme").exists() is fed
    cached = DomainClassification.objects.filter(tenant="acme", host="quiet-harbor.com").first()
    assert (cached is not None) is fed
    if fed:
        assert cached is not None and (cached.domain_type, cached.confidence, cached.source) == (
            "corporate",
            85,
            "rules",
        )
        vector = UrlVector.objects.get(tenant="acme")
        assert vector.url == URL and vector.labels["domain_type"] == "corporate" and vector.dim == 256


def test_the_classification_is_stored_once_per_url_and_tenant(classify_env: str) -> None:
    first = run(75)
    second = run(80)
    row = UrlClassification.objects.get(tenant="acme")
    assert (row.confidence, row.url, row.host, row.domain_type) == (80, URL, "quiet-harbor.com", "corporate")
    assert row.instance_id == second["id"] != first["id"]
    assert row.stages_run == ["cache", "rules"] and row.classification_source == "rules"


def test_bad_params_end_the_instance_with_a_message_that_names_them(classify_env: str) -> None:
    for params, words in [({"url": "not a url at all"}, "'url'"), ({"url": URL, "max_rounds": 0}, "max_rounds"),
                          ({"url": URL, "skip_llm": "yes"}, "skip_llm")]:  # fmt: skip
        status = run_workflow("url-classify", params=params, tenant="acme")
        assert status["status"] == "errored" and words in status["error"]["message"]
    assert not UrlClassification.objects.exists()
