"""The paid services of the RankDisco pipelines, their unit prices, and what a call returns.

Pure: no IO. Each `CostService` has a constant name (`DATAFORSEO_BACKLINKS`…) and the
ledger's coordinates for it: `service` is what budgets are keyed on (the daily DataForSEO
budget covers every DataForSEO endpoint, so the service is the provider) and `model` says
which endpoint or tier within it (the price table's model column already prices DataForSEO
endpoints this way). The constant name travels in the cost row's metadata.

The fallback prices are the providers' typical costs. They are used only when an answer carries
no cost (DataForSEO always reports `tasks[].cost`; ZenRows its `X-Request-Cost` header) and to
estimate what to reserve against a budget before a call.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Generic, TypeVar

from ingest.sources.usage import Usage, cost_quantize

__all__ = [
    "ALL_SERVICES", "DATAFORSEO_BACKLINKS", "DATAFORSEO_KEYWORDS", "DATAFORSEO_REFERRING_DOMAINS",
    "DATAFORSEO_SPAM_SCORE", "ZENROWS_BASIC", "ZENROWS_PREMIUM", "CostService", "PaidCall",
]  # fmt: skip

T = TypeVar("T")


@dataclass(frozen=True)
class CostService:
    """One paid service: where its spend is recorded and what it costs at most."""

    name: str  # the constant's name, e.g. "DATAFORSEO_BACKLINKS"
    service: str  # api_costs.service and the budget key: the provider
    model: str  # the endpoint or tier within the provider
    fallback_per_call: Decimal
    fallback_per_item: Decimal = Decimal(0)

    def fallback_cost(self, *, items: int) -> Decimal:
        """The list price of one call returning `items` rows, for an answer that carries no cost."""
        return cost_quantize(self.fallback_per_call + self.fallback_per_item * items)

    def estimate(self, *, items: int) -> Decimal:
        """The amount to reserve against a budget before asking for up to `items` rows."""
        return self.fallback_cost(items=items)

    def usage(self, *, items: int, cost: Decimal) -> Usage:
        return Usage(service=self.service, model=self.model, items=items, provider_cost=cost)


# DataForSEO list prices: a task fee plus a per-row fee (live endpoints, 2024 price list).
DATAFORSEO_BACKLINKS = CostService(
    "DATAFORSEO_BACKLINKS", "dataforseo", "backlinks/backlinks/live",
    Decimal("0.02"), Decimal("0.00003"),
)  # fmt: skip
DATAFORSEO_REFERRING_DOMAINS = CostService(
    "DATAFORSEO_REFERRING_DOMAINS", "dataforseo", "backlinks/referring_domains/live",
    Decimal("0.02"), Decimal("0.00003"),
)  # fmt: skip
DATAFORSEO_KEYWORDS = CostService(
    "DATAFORSEO_KEYWORDS", "dataforseo", "dataforseo_labs/google/ranked_keywords/live",
    Decimal("0.01"), Decimal("0.0001"),
)  # fmt: skip
# ~$0.02 per 1,000 targets.
DATAFORSEO_SPAM_SCORE = CostService(
    "DATAFORSEO_SPAM_SCORE", "dataforseo", "backlinks/bulk_spam_score/live",
    Decimal("0"), Decimal("0.00002"),
)  # fmt: skip
# The fetch cascade's paid tiers: ZenRows basic (JS rendering) $0.001, premium (residential proxy) $0.01.
ZENROWS_BASIC = CostService("ZENROWS_BASIC", "zenrows", "basic", Decimal("0.001"))
ZENROWS_PREMIUM = CostService("ZENROWS_PREMIUM", "zenrows", "premium", Decimal("0.01"))

ALL_SERVICES: tuple[CostService, ...] = (
    DATAFORSEO_BACKLINKS, DATAFORSEO_KEYWORDS, DATAFORSEO_REFERRING_DOMAINS,
    DATAFORSEO_SPAM_SCORE, ZENROWS_BASIC, ZENROWS_PREMIUM,
)  # fmt: skip


@dataclass(frozen=True)
class PaidCall(Generic[T]):
    """A paid call's typed result with its cost as the provider reported it.

    Unpacks as `(result, cost, usage)`; `track_cost_kwargs()` is what a step passes to
    `ctx.track_cost(**...)` so the api_costs row carries the provider's figure, the item count
    and the service's constant name.
    """

    result: T
    cost: Decimal
    usage: Usage
    cost_service: CostService
    cost_reported: bool = True  # False: the answer carried no cost and the fallback price was used
    metadata: dict[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.result, self.cost, self.usage))

    def track_cost_kwargs(self, *, success: bool = True) -> dict[str, Any]:
        return {
            "service": self.usage.service,
            "model": self.usage.model,
            "cost": self.cost,
            "items": self.usage.items,
            "success": success,
            "metadata": {
                "cost_service": self.cost_service.name,
                "items_count": self.usage.items,
                "cost_reported": self.cost_reported,
                **self.metadata,
            },
        }


def paid_call(
    result: T,
    *,
    service: CostService,
    items: int,
    reported: Decimal | None,
    metadata: dict[str, Any] | None = None,
) -> PaidCall[T]:
    """A `PaidCall` costed from the provider's figure, or the fallback price when it gave none."""
    cost = cost_quantize(reported) if reported is not None else service.fallback_cost(items=items)
    return PaidCall(
        result=result,
        cost=cost,
        usage=service.usage(items=items, cost=cost),
        cost_service=service,
        cost_reported=reported is not None,
        metadata=dict(metadata or {}),
    )
