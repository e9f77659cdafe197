"""The pricer the engine calls (`settings.RUNLEDGER_PRICER`): the price table, then list prices.

Apart from `ingest.pipelines.pricing` because it reads the database (through the selectors'
cache of the price table), while that module stays pure and sits below the sources and the
selectors that use its values.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from ingest.pipelines.pricing import DEFAULT_PRICES, PriceNotFound, cost_for, price_for
from ingest.pipelines.selectors import price_rows_cached
from ingest.sources.usage import Usage


def price_usage(service: str, model: str, usage: Mapping[str, Any], at: datetime) -> Decimal:
    """`settings.RUNLEDGER_PRICER` entry point: prices the engine's usage dict.

    The price table (`ingest.pipelines.models.Price`, edited in the admin) wins; a usage none
    of its rows covers is priced with `DEFAULT_PRICES`. The table is read through the
    selectors' cache (`price_rows_cached`: the rows with their effective dates, re-read every
    30 s).
    """
    item = Usage.from_mapping(usage, service=service, model=model)
    if item.provider_cost is None:
        rows = price_rows_cached()
        if rows:
            try:
                return price_for(item, rows, at).cost(item)
            except PriceNotFound:
                pass
    return cost_for(item, DEFAULT_PRICES, at)


def estimate_usage_cost(service: str, model: str, *, input_tokens: int, output_tokens: int, at: datetime) -> Decimal:
    """What a call could cost at most (no cache hits): the amount a step reserves before it.

    Raises PriceNotFound for a service or model without a price, before anything is spent.
    """
    return price_usage(service, model, {"tokens_in": input_tokens, "tokens_out": output_tokens}, at)
