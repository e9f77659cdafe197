"""What one call to an outside system consumed, as its client reports it (pure values).

Every client in `ingest.sources` reports a `Usage`; `ingest.pipelines.pricing` prices it and
the engine records it (`as_track_cost_kwargs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

QUANTUM = Decimal("0.000001")


def cost_quantize(value: Decimal) -> Decimal:
    return value.quantize(QUANTUM)


@dataclass(frozen=True)
class Usage:
    """What one call consumed. `input_tokens` includes `cached_input_tokens`."""

    service: str = ""
    model: str = ""
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 1
    items: int = 0
    provider_cost: Decimal | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, service: str = "", model: str = "") -> Usage:
        """From our field names or the engine's `track_cost` names (tokens_in, tokens_cached…)."""
        cost = data.get("provider_cost", data.get("cost"))
        return cls(
            service=str(data.get("service", service)),
            model=str(data.get("model", model)),
            input_tokens=int(data.get("input_tokens", data.get("tokens_in", 0)) or 0),
            cached_input_tokens=int(data.get("cached_input_tokens", data.get("tokens_cached", 0)) or 0),
            output_tokens=int(data.get("output_tokens", data.get("tokens_out", 0)) or 0),
            calls=int(data.get("calls", 1)),
            items=int(data.get("items", 0) or 0),
            provider_cost=None if cost is None else Decimal(str(cost)),
        )

    def as_track_cost_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for the engine's `ctx.track_cost(service, ...)`."""
        return {
            "model": self.model,
            "tokens_in": self.input_tokens,
            "tokens_cached": self.cached_input_tokens,
            "tokens_out": self.output_tokens,
            "items": self.items,
            "cost": None if self.provider_cost is None else cost_quantize(self.provider_cost),
        }
