"""Circuit breakers as the breakers page shows them: state, failures, opened at, next probe,
and each breaker's transitions. A breaker of a tenant is seen by that tenant's members; a shared
one (no tenant) by staff only, as global budgets are."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from ingest.engine.models import BreakerTransition, CircuitBreaker

TRANSITION_LIMIT = 200


@dataclass(frozen=True)
class BreakerRow:
    breaker: CircuitBreaker
    last: BreakerTransition | None


def _visible(*, tenants: Collection[str], see_global: bool) -> Q:
    q = Q(tenant__in=list(tenants))
    return q | Q(tenant="") if see_global else q


def breakers_visible(*, tenants: Collection[str], see_global: bool, state: str = "") -> list[BreakerRow]:
    """Open and half-open breakers first, then by key."""
    qs = CircuitBreaker.objects.filter(_visible(tenants=tenants, see_global=see_global))
    if state:
        qs = qs.filter(state=state)
    rows = sorted(qs, key=lambda b: (b.state == "closed", b.key))
    last: dict[str, BreakerTransition] = {}
    for t in BreakerTransition.objects.filter(breaker_id__in=[b.key for b in rows]).order_by("id"):
        last[t.breaker_id] = t
    return [BreakerRow(b, last.get(b.key)) for b in rows]


def breaker_get(*, key: str, tenants: Collection[str], see_global: bool) -> CircuitBreaker | None:
    return CircuitBreaker.objects.filter(_visible(tenants=tenants, see_global=see_global), key=key).first()


def breaker_transitions(*, key: str, before: datetime | None = None) -> list[BreakerTransition]:
    qs = BreakerTransition.objects.filter(breaker_id=key)
    if before is not None:
        qs = qs.filter(created_at__lt=before)
    return list(qs.order_by("-id")[:TRANSITION_LIMIT])
