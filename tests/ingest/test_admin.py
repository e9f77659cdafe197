"""The admin: prices editable (and used for costs at once), pipeline tables browsable."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client

from ingest.pipelines.models import KeywordList, Price
from ingest.pipelines.pricer import price_usage

pytestmark = [pytest.mark.db, pytest.mark.django_db]


@pytest.fixture
def admin_client() -> Client:
    User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.login(username="root", password="pw")
    return client


def test_an_admin_adds_a_price_and_the_pricer_uses_it(admin_client: Client) -> None:
    usage = {"tokens_in": 1_000_000, "tokens_out": 0}
    at = datetime(2025, 6, 1, tzinfo=UTC)
    assert price_usage("openai", "gpt-4o-mini", usage, at) == Decimal("0.15")  # the default list price
    response = admin_client.post(
        "/admin/ingest/price/add/",
        {
            "service": "openai",
            "model": "gpt-4o-mini",
            "effective_from_0": "2025-05-01",
            "effective_from_1": "00:00:00",
            "input_per_million": "0.10",
            "cached_input_per_million": "0.05",
            "output_per_million": "0.40",
            "per_call": "0",
            "per_item": "0",
            "note": "negotiated",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    assert Price.objects.count() == 1
    assert price_usage("openai", "gpt-4o-mini", usage, at) == Decimal("0.10")
    assert price_usage("openai", "gpt-4o-mini", usage, datetime(2025, 4, 1, tzinfo=UTC)) == Decimal("0.15")
    later = datetime(2025, 10, 1, tzinfo=UTC)
    assert price_usage("deepseek", "deepseek-chat", usage, later) == Decimal("0.28")  # not in the table: defaults


def test_an_admin_sets_a_keyword_list_and_browses_the_pipeline_tables(admin_client: Client) -> None:
    response = admin_client.post(
        "/admin/ingest/keywordlist/add/", {"tenant": "acme", "keywords": '["budget", " MSA "]'}
    )
    assert response.status_code == 302
    assert KeywordList.objects.get(tenant="acme").keywords == ["budget", "MSA"]
    for page in ("price", "keywordlist", "connection", "fact", "signalevaluation", "factembedding"):
        assert admin_client.get(f"/admin/ingest/{page}/").status_code == 200, page
    assert admin_client.get("/admin/ingest/connection/add/").status_code == 200


@pytest.mark.django_db  # price_usage reads the admin-edited price table first
def test_the_engine_pricer_reads_track_cost_names() -> None:
    cost = price_usage(
        "anthropic",
        "claude-sonnet-4-20250514",
        {"tokens_in": 10_000, "tokens_cached": 0, "tokens_out": 1_000},
        datetime(2025, 11, 1, tzinfo=UTC),
    )

    assert cost == Decimal("0.045000") and isinstance(cost, Decimal)
