"""Reads of RankDisco's tables for the dashboard, always inside the caller's tenants: a domain
of another tenant is not found."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.fields.json import KeyTextTransform

from ingest.engine.models import ApiCost, Instance
from ingest.rankdisco.models import (
    Backlink,
    BrandProperty,
    Domain,
    KeywordIntent,
    OnboardStatus,
    RankedKeyword,
    ReferringDomain,
)

ONBOARD_WORKFLOW = "domain-onboard"


def domain_list(*, tenants: Collection[str], status: str = "", q: str = "", limit: int = 200) -> QuerySet[Domain]:
    """The tenants' domains, last onboarded first; `status` one of OnboardStatus (else all)."""
    qs = Domain.objects.filter(tenant__in=list(tenants))
    if status in OnboardStatus.values:
        qs = qs.filter(onboard_status=status)
    if q.strip():
        qs = qs.filter(name__icontains=q.strip()[:253])
    return qs.order_by("-updated_at", "id")[:limit]


def domain_status_counts(*, tenants: Collection[str]) -> dict[str, int]:
    rows = Domain.objects.filter(tenant__in=list(tenants)).values("onboard_status").annotate(n=Count("id"))
    return {r["onboard_status"]: r["n"] for r in rows}


def domain_get(*, tenants: Collection[str], domain_id: int) -> Domain | None:
    return Domain.objects.filter(id=domain_id, tenant__in=list(tenants)).first()


@dataclass(frozen=True)
class DomainDetail:
    domain: Domain
    by_source: list[tuple[str, int, int]]  # (classification source, backlinks, ranking URLs)
    unclassified: int
    cost_by_stage: list[dict[str, Any]]
    cost_total: Decimal
    cache_hits: int  # DataForSEO calls its cache answered at no cost
    cache_saved: Decimal  # what they would have cost
    backlinks: list[Backlink]
    keywords: list[RankedKeyword]
    referring: list[ReferringDomain]
    properties: list[BrandProperty]
    runs: list[Instance] = field(default_factory=list)
    intents: list[IntentCount] = field(default_factory=list)
    intent_unclassified: int = 0  # keywords no rule or answer gave an intent yet
    intent: str = ""  # the intent the keywords list shows ("" every keyword)


@dataclass(frozen=True)
class IntentCount:
    """How many of a domain's keywords have an intent, and who decided it."""

    intent: str
    keywords: int
    by_rules: int
    by_llm: int


def _sources(qs: QuerySet[Any]) -> dict[str, int]:
    rows = qs.exclude(classification_source="").values("classification_source").annotate(n=Count("id"))
    return {r["classification_source"]: r["n"] for r in rows}


def keyword_intent_counts(*, domain: Domain) -> tuple[list[IntentCount], int]:
    """(one IntentCount per intent, in the intents' order, keywords without an intent)."""
    rows = RankedKeyword.objects.filter(domain=domain).values("intent", "intent_source").annotate(n=Count("id"))
    counts: dict[tuple[str, str], int] = {(r["intent"], r["intent_source"]): r["n"] for r in rows}
    found = [
        IntentCount(
            intent=i,
            keywords=sum(n for (k, _), n in counts.items() if k == i),
            by_rules=counts.get((i, "rules"), 0),
            by_llm=counts.get((i, "llm"), 0),
        )
        for i in KeywordIntent.values
    ]
    return [c for c in found if c.keywords], sum(n for (k, _), n in counts.items() if not k)


def keyword_llm_intents(*, domain_id: int, keywords: Collection[str]) -> dict[str, tuple[str, int | None]]:
    """{keyword: (intent, confidence)} of those keywords of the domain an LLM already classified."""
    rows = (
        RankedKeyword.objects.filter(domain_id=domain_id, keyword__in=list(keywords), intent_source="llm")
        .exclude(intent="")
        .values_list("keyword", "intent", "intent_confidence")
    )
    return {k: (i, c) for k, i, c in rows}


def domain_onboardings(*, domain: Domain) -> QuerySet[Instance]:
    """The domain's onboarding runs (every `domain-onboard` instance of its tenant for its name)."""
    return Instance.objects.filter(workflow=ONBOARD_WORKFLOW, tenant=domain.tenant, params__domain=domain.name)


def domain_cost_rows(*, domain: Domain) -> QuerySet[ApiCost]:
    """Every cost row of the domain's onboardings and of their child instances (the url-classify
    runs of its backlinks and ranking URLs, whatever host each URL is on), each row once; and a
    cost row of the tenant that names the domain but whose instance the ledger no longer holds."""
    runs = domain_onboardings(domain=domain).values("id")
    children = Instance.objects.filter(parent_id__in=runs).values("id")
    mine = (
        Q(instance_id__in=runs) | Q(instance_id__in=children) | Q(instance__isnull=True, metadata__domain=domain.name)
    )
    return ApiCost.objects.filter(mine, tenant=domain.tenant)


def domain_costs(*, domain: Domain) -> list[dict[str, Any]]:
    """What was spent on the domain (`domain_cost_rows`), by stage and service; `hits` counts the
    calls the DataForSEO cache answered at no cost."""
    rows = (
        domain_cost_rows(domain=domain)
        .annotate(stage=KeyTextTransform("stage", "metadata"))
        .values("stage", "service", "workflow_type")
        .annotate(total=Sum("cost"), calls=Count("id"), hits=Count("id", filter=Q(metadata__cache_hit=True)))
    )
    return sorted(({**r, "stage": r["stage"] or ""} for r in rows), key=lambda r: (-r["total"], r["stage"]))


def domain_cache_savings(*, domain: Domain) -> tuple[int, Decimal]:
    """(calls the DataForSEO cache answered, what they would have cost) over the domain's cost rows."""
    saved = [
        row.get("saved")
        for row in domain_cost_rows(domain=domain).filter(metadata__cache_hit=True).values_list("metadata", flat=True)
    ]
    return len(saved), sum((_money(value) for value in saved), Decimal(0))


def _money(value: Any) -> Decimal:
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return Decimal(0)


def domain_detail(*, tenants: Collection[str], domain_id: int, rows: int = 25, intent: str = "") -> DomainDetail | None:
    """The domain's page; `intent` (one of KeywordIntent) narrows its keywords list to that intent."""
    domain = domain_get(tenants=tenants, domain_id=domain_id)
    if domain is None:
        return None
    backlinks = Backlink.objects.filter(domain=domain)
    keywords = RankedKeyword.objects.filter(domain=domain)
    from_backlinks, from_keywords = _sources(backlinks), _sources(keywords)
    by_source = [
        (s, from_backlinks.get(s, 0), from_keywords.get(s, 0)) for s in sorted(set(from_backlinks) | set(from_keywords))
    ]
    costs = domain_costs(domain=domain)
    intents, intent_unclassified = keyword_intent_counts(domain=domain)
    listed = keywords.filter(intent=intent) if intent in KeywordIntent.values else keywords
    hits, saved = domain_cache_savings(domain=domain)
    runs = domain_onboardings(domain=domain).order_by("-created_at")[:10]
    return DomainDetail(
        domain=domain,
        by_source=by_source,
        unclassified=backlinks.filter(classification_source="").count()
        + keywords.filter(classification_source="").exclude(url="").count(),
        cost_by_stage=costs,
        cost_total=sum((c["total"] for c in costs), Decimal(0)),
        cache_hits=hits,
        cache_saved=saved,
        backlinks=list(backlinks.order_by("-domain_from_rank", "id")[:rows]),
        keywords=list(listed.order_by("-search_volume", "id")[:rows]),
        referring=list(ReferringDomain.objects.filter(domain=domain).order_by("-rank", "id")[:rows]),
        properties=list(BrandProperty.objects.filter(domain=domain).order_by("kind", "network", "url")),
        runs=list(runs),
        intents=intents,
        intent_unclassified=intent_unclassified,
        intent=intent if intent in KeywordIntent.values else "",
    )
