"""The price table is read once per PRICE_CACHE_SECONDS per process, with exact effective dates."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from ingest.pipelines import selectors
from ingest.pipelines.models import Price
from ingest.pipelines.pricer import price_usage
from ingest.pipelines.services import price_upsert

pytestmark = [pytest.mark.db, pytest.mark.django_db]
MILLION_IN = {"tokens_in": 1_000_000, "tokens_out": 0}


def test_a_row_dated_ahead_takes_over_at_its_date_from_the_cached_table(django_assert_num_queries) -> None:
    price_upsert(
        service="openai", model="gpt-4o-mini", effective_from=datetime(2025, 1, 1, tzinfo=UTC), input_per_million="0.10"
    )
    price_upsert(
        service="openai", model="gpt-4o-mini", effective_from=datetime(2025, 7, 1, tzinfo=UTC), input_per_million="0.12"
    )
    assert price_usage("openai", "gpt-4o-mini", MILLION_IN, datetime(2025, 6, 30, 23, 59, tzinfo=UTC)) == Decimal(
        "0.10"
    )
    with django_assert_num_queries(0):
        assert price_usage("openai", "gpt-4o-mini", MILLION_IN, datetime(2025, 7, 1, tzinfo=UTC)) == Decimal("0.12")
        assert price_usage("openai", "gpt-4o-mini", MILLION_IN, datetime(2024, 8, 1, tzinfo=UTC)) == Decimal(
            "0.15"
        )  # before the table: list price


def test_a_saved_price_applies_at_once_in_this_process() -> None:
    at = datetime(2025, 6, 1, tzinfo=UTC)
    assert price_usage("openai", "gpt-4o-mini", MILLION_IN, at) == Decimal("0.15")  # list price, table cached
    row = price_upsert(
        service="openai", model="gpt-4o-mini", effective_from=datetime(2025, 1, 1, tzinfo=UTC), input_per_million="0.10"
    )
    assert price_usage("openai", "gpt-4o-mini", MILLION_IN, at) == Decimal("0.10")
    row.delete()
    assert price_usage("openai", "gpt-4o-mini", MILLION_IN, at) == Decimal("0.15")


def test_an_edit_made_elsewhere_is_read_once_the_cache_is_older_than_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    at = datetime(2025, 6, 1, tzinfo=UTC)
    clock = [1000.0]
    monkeypatch.setattr(selectors.time, "monotonic", lambda: clock[0])
    assert price_usage("openai", "gpt-4o-mini", MILLION_IN, at) == Decimal("0.15")
    # Another process's edit: no signal reaches this one (bulk_create sends none either).
    Price.objects.bulk_create(
        [
            Price(
                service="openai",
                model="gpt-4o-mini",
                effective_from=datetime(2025, 1, 1, tzinfo=UTC),
                input_per_million="0.10",
            )
        ]
    )
    clock[0] += selectors.PRICE_CACHE_SECONDS
    assert price_usage("openai", "gpt-4o-mini", MILLION_IN, at) == Decimal("0.15")
    clock[0] += 0.001
    assert price_usage("openai", "gpt-4o-mini", MILLION_IN, at) == Decimal("0.10")
