"""The URL classifications page, seen by the three personas: filters by domain and deciding
stage, tenancy like every other page, bad filters refused with a message."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from ingest.classify.result import ClassificationResult
from ingest.classify.services import url_classification_upsert

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def classified(tenant: str, url: str, host: str, source: str, confidence: int = 80) -> None:
    result = ClassificationResult(url=url, confidence=confidence, domain_type="blog", page_type="article",
                                  modifiers=[], classification_source=source, stages_run=["cache", "rules"],
                                  round=0, cost_usd=0.0011, fetch_method=None, content_signals=None)  # fmt: skip
    url_classification_upsert(tenant=tenant, host=host, result=result, instance_id="i-1")


@pytest.fixture
def rows(users: Any) -> None:
    classified("acme", "https://blog.acme.example/post-1", "blog.acme.example", "rules")
    classified("acme", "https://acme.example/pricing", "acme.example", "llm")
    classified("acme", "https://notacme.example/x", "notacme.example", "content")
    classified("initech", "https://initech.example/secret-page", "initech.example", "rules")


def test_the_viewer_sees_its_tenants_classifications_with_counts_per_stage(viewer: Client, rows: None) -> None:
    body = viewer.get("/classifications/").content.decode()
    assert "3 URLs" in body and "blog.acme.example/post-1" in body and "initech.example" not in body
    assert 'data-source="rules">Rules 1<' in body and 'data-source="llm">LLM 1<' in body


def test_the_domain_filter_takes_subdomains_but_not_lookalikes(viewer: Client, rows: None) -> None:
    body = viewer.get("/classifications/", {"domain": "acme.example"}).content.decode()
    assert "2 URLs" in body and "notacme.example" not in body and "blog.acme.example" in body


def test_the_stage_filter_and_htmx_render_only_the_results(viewer: Client, rows: None) -> None:
    response = viewer.get("/classifications/", {"source": "llm"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and "<nav" not in body
    assert "1 URL" in body and "acme.example/pricing" in body and "post-1" not in body


def test_a_stranger_sees_only_its_own_tenant_even_when_it_asks_for_another(stranger: Client, rows: None) -> None:
    assert "initech.example/secret-page" in stranger.get("/classifications/").content.decode()
    body = stranger.get("/classifications/", {"tenant": "acme"}).content.decode()
    assert "0 URLs" in body and "acme.example" not in body


def test_bad_filters_are_a_400_that_says_what_was_wrong(operator: Client, rows: None) -> None:
    response = operator.get("/classifications/", {"source": "magic"})
    assert response.status_code == 400 and "source=&#x27;magic&#x27; is not one of" in response.content.decode()
    response = operator.get("/classifications/", {"page": "0"})
    assert response.status_code == 400 and "page=&#x27;0&#x27; is not a whole number" in response.content.decode()


def test_an_anonymous_visitor_is_sent_to_log_in(client: Client) -> None:
    response = client.get("/classifications/")
    assert response.status_code in (302, 403)
