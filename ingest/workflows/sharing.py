"""How the shipped workflows share the workers between tenants and between live and bulk work.

Every shipped workflow declares `concurrency_key = "tenant"`: the engine's claim serves the
tenants round robin (docs/flow-control.md), so one tenant's backlog never queues ahead of
another tenant's live webhooks. `RUNLEDGER_TENANT_CONCURRENCY` caps how many instances of a
workflow one tenant runs at once (`gong-ingest=4,domain-onboard=2`; none by default), and one
tenant's own cap in place of that (`gong-ingest/acme=8`). The operators' limits set in the
console or the REST API (the engine's ConcurrencyLimit rows) win over both.

Backfills (`manage.py ingest_pull`) and bulk onboardings (`manage.py onboard_domains`) start
their instances at `BACKFILL_PRIORITY`, below the `LIVE_PRIORITY` of webhooks, schedules and the
console, so within a tenant the live work goes first; url-classify children inherit their
onboarding's priority.
"""

from __future__ import annotations

from django.conf import settings

LIVE_PRIORITY = 0
BACKFILL_PRIORITY = -10
FAIR_KEY = "tenant"


def _caps() -> dict[str, int]:
    return getattr(settings, "RUNLEDGER_TENANT_CONCURRENCY", {}) or {}


def tenant_concurrency(workflow: str) -> int | None:
    """The per-tenant cap on `workflow`'s running instances from settings, or None (no cap)."""
    return _caps().get(workflow)


def tenant_overrides(workflow: str) -> dict[str, int]:
    """The caps of single tenants on `workflow` from settings (`gong-ingest/acme=8`)."""
    prefix = f"{workflow}/"
    return {key[len(prefix) :]: cap for key, cap in _caps().items() if key.startswith(prefix)}
