from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from ingest.pipelines.pricing import DEFAULT_PRICES, PriceNotFound, PriceRow, cost_for
from ingest.sources.usage import Usage

pytestmark = pytest.mark.pure

NOW = datetime(2025, 11, 1, tzinfo=UTC)


def test_gpt_4o_mini_is_priced_with_cached_tokens_at_the_cached_rate() -> None:
    usage = Usage(
        "openai",
        "gpt-4o-mini",
        input_tokens=1_000_000,
        cached_input_tokens=400_000,
        output_tokens=200_000,
    )

    # 600k × $0.15 + 400k × $0.075 + 200k × $0.60 per million = 0.09 + 0.03 + 0.12
    assert cost_for(usage, DEFAULT_PRICES, NOW) == Decimal("0.240000")


def test_a_dated_model_name_uses_its_family_price() -> None:
    usage = Usage("openai", "gpt-4o-mini-2024-07-18", input_tokens=2000, output_tokens=500)

    assert cost_for(usage, DEFAULT_PRICES, NOW) == Decimal("0.000600")


def test_the_price_in_force_at_the_time_is_used() -> None:
    usage = Usage(
        "deepseek",
        "deepseek-chat",
        input_tokens=1_000_000,
        cached_input_tokens=500_000,
        output_tokens=1_000_000,
    )

    assert cost_for(usage, DEFAULT_PRICES, datetime(2025, 9, 10, tzinfo=UTC)) == Decimal("1.995000")
    assert cost_for(usage, DEFAULT_PRICES, NOW) == Decimal("0.574000")


def test_a_provider_reported_cost_wins() -> None:
    usage = Usage("dataforseo", "backlinks/backlinks/live", items=100, provider_cost=Decimal("0.0203"))

    assert cost_for(usage, DEFAULT_PRICES, NOW) == Decimal("0.020300")


def test_per_call_and_per_item_prices_add_up() -> None:
    usage = Usage("dataforseo", "backlinks/backlinks/live", items=1000)

    assert cost_for(usage, DEFAULT_PRICES, NOW) == Decimal("0.050000")


def test_gong_and_salesforce_calls_cost_nothing() -> None:
    assert cost_for(Usage("gong", "", calls=10), DEFAULT_PRICES, NOW) == Decimal("0.000000")
    assert cost_for(Usage("salesforce", "query"), DEFAULT_PRICES, NOW) == Decimal("0.000000")


def test_an_unknown_model_says_what_to_add() -> None:
    with pytest.raises(PriceNotFound, match="add a price row"):
        cost_for(Usage("openai", "gpt-9"), DEFAULT_PRICES, NOW)


def test_rows_convert_from_mappings_with_string_prices() -> None:
    row = PriceRow.from_row(
        {
            "service": "x",
            "model": "",
            "effective_from": "2025-01-01",
            "per_call": "0.005",
            "per_item": None,
        }
    )

    assert row.per_call == Decimal("0.005") and row.per_item == Decimal(0)
    assert row.effective_from == datetime(2025, 1, 1, tzinfo=UTC)


def test_costs_are_never_floats() -> None:
    for row in DEFAULT_PRICES:
        usage = Usage(
            row.service,
            row.model,
            input_tokens=123,
            cached_input_tokens=7,
            output_tokens=45,
            items=3,
        )
        assert isinstance(cost_for(usage, DEFAULT_PRICES, NOW), Decimal)
