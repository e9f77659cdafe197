"""Reads of URL classification's tables, for the workflow's stages and the dashboard."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q

from ingest.classify.models import (
    ClassificationSource,
    DomainClassification,
    DomainFetchMethod,
    UrlClassification,
)
from ingest.classify.result import DOMAIN_AXES, Candidate, candidate

__all__ = ["ClassificationPage", "classification_list", "domain_cache_get", "fetch_method_get"]


def domain_cache_get(*, tenant: str, host: str) -> Candidate | None:
    """The host's domain-level classification as a candidate, whatever its confidence."""
    row = DomainClassification.objects.filter(tenant=tenant, host=host).first()
    if row is None:
        return None
    return candidate(row.confidence, {axis: getattr(row, axis) for axis in DOMAIN_AXES}, row.modifiers)


def fetch_method_get(*, tenant: str, host: str) -> str | None:
    return DomainFetchMethod.objects.filter(tenant=tenant, host=host).values_list("method", flat=True).first()


@dataclass(frozen=True)
class ClassificationPage:
    rows: list[dict[str, Any]]
    total: int
    by_source: dict[str, int]


def classification_list(
    *, tenants: list[str], host: str = "", source: str = "", limit: int = 100, offset: int = 0
) -> ClassificationPage:
    """Classified URLs of the given tenants, newest first, filtered by host (a domain matches its
    subdomains) and by the stage that decided; with the count per stage of the filtered set."""
    qs = UrlClassification.objects.filter(tenant__in=tenants)
    if host:
        host = host.strip().lower().removeprefix("www.")
        qs = qs.filter(Q(host=host) | Q(host__endswith="." + host))
    counts = {s: 0 for s in ClassificationSource.values}
    for row in qs.order_by().values("classification_source").annotate(n=Count("id")):
        counts[row["classification_source"]] = row["n"]
    if source:
        qs = qs.filter(classification_source=source)
    total = qs.count()
    rows: list[dict[str, Any]] = [dict(row) for row in qs.order_by("-updated_at", "-id").values(
        "id", "tenant", "host", "url", "confidence", "domain_type", "page_type", "tactic_type",
        "channel_bucket", "media_type", "modifiers", "classification_source", "stages_run", "round",
        "cost_usd", "fetch_method", "instance_id", "duration_ms", "updated_at")[offset : offset + limit]]  # fmt: skip
    return ClassificationPage(rows=rows, total=total, by_source=counts)
