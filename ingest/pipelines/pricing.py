"""Pure cost code: price rows, `cost_for(usage)` and the list prices (Decimal only, no IO).

What a call consumed (`Usage`) is what the clients report, so it lives with them in
`ingest.sources.usage`; this module prices it.

A price row belongs to a service and optionally a model, and applies from its
`effective_from` until a newer row for the same service and model takes over. Token prices
are per million tokens. A provider-reported cost (DataForSEO's `tasks[].cost`) always wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from ingest.sources.usage import Usage, cost_quantize

MILLION = Decimal(1_000_000)
ZERO = Decimal(0)


class PricingError(Exception):
    """No price is known for this usage."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__doc__)


class PriceNotFound(PricingError):
    """No price row matches the service, model and time of the usage."""


@dataclass(frozen=True)
class PriceRow:
    service: str
    model: str
    effective_from: datetime
    input_per_million: Decimal = ZERO
    cached_input_per_million: Decimal = ZERO
    output_per_million: Decimal = ZERO
    per_call: Decimal = ZERO
    per_item: Decimal = ZERO

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PriceRow:
        """From a mapping (a database row's values, a CSV line, JSON); prices as strings."""
        when = row["effective_from"]
        if isinstance(when, str):
            when = datetime.fromisoformat(when)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)

        def price(key: str) -> Decimal:
            value = row.get(key)
            return ZERO if value in (None, "") else Decimal(str(value))

        return cls(
            service=str(row["service"]),
            model=str(row.get("model") or ""),
            effective_from=when,
            input_per_million=price("input_per_million"),
            cached_input_per_million=price("cached_input_per_million"),
            output_per_million=price("output_per_million"),
            per_call=price("per_call"),
            per_item=price("per_item"),
        )

    def cost(self, usage: Usage) -> Decimal:
        cached = min(usage.cached_input_tokens, usage.input_tokens)
        uncached = usage.input_tokens - cached
        total = (
            Decimal(uncached) * self.input_per_million
            + Decimal(cached) * self.cached_input_per_million
            + Decimal(usage.output_tokens) * self.output_per_million
        ) / MILLION
        total += Decimal(usage.calls) * self.per_call + Decimal(usage.items) * self.per_item
        return cost_quantize(total)


# The price table's columns a PriceRow is read from (the admin lists them too).
PRICE_FIELDS = tuple(f.name for f in fields(PriceRow))


def _model_matches(row_model: str, model: str) -> int:
    """Match strength: exact 3, dated variant (`gpt-4o-mini-2024-07-18`) 2, catch-all 1."""
    if row_model == model:
        return 3
    if row_model and model.startswith(row_model + "-"):
        return 2
    return 1 if row_model == "" else 0


def price_for(usage: Usage, prices: Iterable[PriceRow], at: datetime) -> PriceRow:
    """The row for the usage's service and model in force at `at` (the most specific model)."""
    best: tuple[int, int, datetime] | None = None
    chosen: PriceRow | None = None
    for row in prices:
        strength = _model_matches(row.model, usage.model)
        if row.service != usage.service or not strength or row.effective_from > at:
            continue
        rank = (strength, len(row.model), row.effective_from)
        if best is None or rank > best:
            best, chosen = rank, row
    if chosen is None:
        raise PriceNotFound(
            f"no price for service {usage.service!r} model {usage.model!r} at {at.isoformat()}; "
            "add a price row for it (or a row with an empty model for the whole service)"
        )
    return chosen


def cost_for(usage: Usage, prices: Iterable[PriceRow], at: datetime) -> Decimal:
    """The cost of `usage` at time `at`, quantized to 6 places; provider-reported cost wins."""
    if usage.provider_cost is not None:
        return cost_quantize(usage.provider_cost)
    return price_for(usage, prices, at).cost(usage)


# List prices (USD) as published by each provider; per-million-token prices for models,
# per-call/per-item prices for APIs. Check the providers' pages before relying on them.
# fmt: off
_DEFAULT_ROWS: tuple[dict[str, str], ...] = (
    {"service": "openai", "model": "gpt-4o-mini", "effective_from": "2024-07-18",
     "input_per_million": "0.15", "cached_input_per_million": "0.075",
     "output_per_million": "0.60"},
    {"service": "openai", "model": "gpt-4.1-mini", "effective_from": "2025-04-14",
     "input_per_million": "0.40", "cached_input_per_million": "0.10",
     "output_per_million": "1.60"},
    {"service": "openai", "model": "text-embedding-3-small", "effective_from": "2024-01-25",
     "input_per_million": "0.02"},
    {"service": "deepseek", "model": "deepseek-chat", "effective_from": "2025-09-05",
     "input_per_million": "0.56", "cached_input_per_million": "0.07",
     "output_per_million": "1.68"},
    {"service": "deepseek", "model": "deepseek-chat", "effective_from": "2025-09-29",
     "input_per_million": "0.28", "cached_input_per_million": "0.028",
     "output_per_million": "0.42"},
    {"service": "anthropic", "model": "claude-3-5-haiku", "effective_from": "2024-11-04",
     "input_per_million": "0.80", "cached_input_per_million": "0.08",
     "output_per_million": "4.00"},
    {"service": "anthropic", "model": "claude-sonnet-4", "effective_from": "2025-05-22",
     "input_per_million": "3.00", "cached_input_per_million": "0.30",
     "output_per_million": "15.00"},
    {"service": "gong", "model": "", "effective_from": "2020-01-01", "per_call": "0"},
    {"service": "salesforce", "model": "", "effective_from": "2020-01-01", "per_call": "0"},
    {"service": "wordllama", "model": "", "effective_from": "2020-01-01"},
    {"service": "rules", "model": "", "effective_from": "2020-01-01"},
    {"service": "dataforseo", "model": "backlinks/backlinks/live",
     "effective_from": "2024-01-01", "per_call": "0.02", "per_item": "0.00003"},
    {"service": "dataforseo", "model": "backlinks/referring_domains/live",
     "effective_from": "2024-01-01", "per_call": "0.02", "per_item": "0.00003"},
    {"service": "dataforseo", "model": "backlinks/bulk_spam_score/live",
     "effective_from": "2024-01-01", "per_call": "0.02", "per_item": "0.00003"},
    {"service": "dataforseo", "model": "dataforseo_labs/google/ranked_keywords/live",
     "effective_from": "2024-01-01", "per_call": "0.01", "per_item": "0.0001"},
    {"service": "dataforseo", "model": "serp/google/organic/live/advanced",
     "effective_from": "2024-01-01", "per_call": "0.002"},
)
# fmt: on

DEFAULT_PRICES: tuple[PriceRow, ...] = tuple(PriceRow.from_row(row) for row in _DEFAULT_ROWS)
