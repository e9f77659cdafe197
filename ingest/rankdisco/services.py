"""Writes to RankDisco's tables, each keyword-only and idempotent: a step that runs again
(a retry, a replay after a crash, a second onboarding) writes the same rows again.

The stores are bulk upserts on the tables' unique keys (`bulk_create(update_conflicts=True)`:
`INSERT … ON CONFLICT DO UPDATE` on PostgreSQL and SQLite), in batches, so a domain onboarded
twice keeps one row per backlink, keyword, referring domain and brand property.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import transaction

from ingest.engine import now as engine_now
from ingest.rankdisco.models import (
    Backlink,
    BrandProperty,
    BrandPropertyKind,
    Domain,
    OnboardStatus,
    RankedKeyword,
    ReferringDomain,
)

BATCH = 500
LOW_CONFIDENCE = 65  # below the LLM verification threshold: counted as low confidence
_HOST = re.compile(r"^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}$")


class InvalidDomain(ValueError):
    """Not a domain name."""


class DomainNotFound(LookupError):
    """No such domain for this tenant."""


def domain_name_normalize(raw: str) -> str:
    """`https://www.Example.com/path` → `example.com`; raises InvalidDomain saying why."""
    text = str(raw or "").strip().lower()
    text = re.sub(r"^[a-z][a-z0-9+.-]*://", "", text).split("/", 1)[0].split("?", 1)[0]
    text = text.rsplit("@", 1)[-1].split(":", 1)[0].rstrip(".").removeprefix("www.")
    if not _HOST.match(text):
        raise InvalidDomain(f"{str(raw)[:100]!r} is not a domain name (expected something like example.com)")
    return text


def backlink_key(url_from: str, url_to: str) -> str:
    return hashlib.sha256(f"{url_from}\n{url_to}".encode()).hexdigest()


def domain_ensure(*, tenant: str, name: str, domain_id: int | None = None) -> Domain:
    """The tenant's domain row (created when missing). A `domain_id` must name this tenant's
    row for this domain: an id of another tenant or another name is refused."""
    name = domain_name_normalize(name)
    if domain_id is not None:
        found = Domain.objects.filter(id=domain_id, tenant=tenant).first()
        if found is None or found.name != name:
            raise DomainNotFound(f"domain id {domain_id} is not {name!r} of tenant {tenant!r}")
        return found
    now = engine_now()
    domain, _ = Domain.objects.get_or_create(tenant=tenant, name=name, defaults={"created_at": now, "updated_at": now})
    return domain


def domain_onboard_begin(*, domain_id: int, instance_id: str) -> dict[str, Any]:
    """initialize: onboard_status in_progress. Counted once per instance, however often it runs."""
    now = engine_now()
    with transaction.atomic():
        domain = Domain.objects.select_for_update().get(id=domain_id)
        first = domain.onboard_instance_id != instance_id
        domain.onboard_status = OnboardStatus.IN_PROGRESS
        domain.onboard_started_at = now if first or domain.onboard_started_at is None else domain.onboard_started_at
        domain.onboard_completed_at, domain.onboard_duration_ms = None, None
        domain.onboard_instance_id = instance_id
        domain.onboard_count += 1 if first else 0
        domain.errors, domain.updated_at = [], now
        domain.save()
    return {"domain_id": domain.id, "started_at": domain.onboard_started_at.isoformat()}


def _upsert(model: Any, rows: list[Any], *, unique: list[str], update: list[str]) -> int:
    for start in range(0, len(rows), BATCH):
        model.objects.bulk_create(
            rows[start : start + BATCH], update_conflicts=True, unique_fields=unique, update_fields=update
        )
    return len(rows)


def backlinks_upsert(*, domain: Domain, items: Sequence[Mapping[str, Any]], now: datetime) -> int:
    rows: dict[str, Backlink] = {}
    for item in items:
        key = backlink_key(str(item["url_from"]), str(item["url_to"]))
        rows[key] = Backlink(
            tenant=domain.tenant,
            domain=domain,
            key=key,
            url_from=item["url_from"],
            url_to=item["url_to"],
            domain_from=item.get("domain_from") or "",
            anchor=item.get("anchor") or "",
            dofollow=bool(item.get("dofollow")),
            domain_from_rank=item.get("domain_from_rank"),
            page_from_rank=item.get("page_from_rank"),
            spam_score=item.get("spam_score"),
            first_seen=item.get("first_seen") or "",
            last_seen=item.get("last_seen") or "",
            is_lost=bool(item.get("is_lost")),
            updated_at=now,
        )
    return _upsert(
        Backlink,
        list(rows.values()),
        unique=["domain", "key"],
        update=[
            "domain_from",
            "anchor",
            "dofollow",
            "domain_from_rank",
            "page_from_rank",
            "spam_score",
            "first_seen",
            "last_seen",
            "is_lost",
            "updated_at",
        ],
    )


def keywords_upsert(*, domain: Domain, items: Sequence[Mapping[str, Any]], now: datetime) -> int:
    rows = {
        str(item["keyword"]): RankedKeyword(
            tenant=domain.tenant,
            domain=domain,
            keyword=str(item["keyword"])[:500],
            search_volume=item.get("search_volume"),
            cpc=item.get("cpc"),
            competition=item.get("competition"),
            serp_type=item.get("serp_type") or "",
            rank_group=item.get("rank_group"),
            rank_absolute=item.get("rank_absolute"),
            url=item.get("url") or "",
            etv=item.get("etv"),
            updated_at=now,
        )
        for item in items
    }
    return _upsert(
        RankedKeyword,
        list(rows.values()),
        unique=["domain", "keyword"],
        update=[
            "search_volume",
            "cpc",
            "competition",
            "serp_type",
            "rank_group",
            "rank_absolute",
            "url",
            "etv",
            "updated_at",
        ],
    )


def referring_domains_upsert(*, domain: Domain, items: Sequence[Mapping[str, Any]], now: datetime) -> int:
    rows = {
        str(item["domain"]): ReferringDomain(
            tenant=domain.tenant,
            domain=domain,
            referring_domain=str(item["domain"]),
            rank=item.get("rank"),
            backlinks=int(item.get("backlinks") or 0),
            referring_pages=int(item.get("referring_pages") or 0),
            spam_score=item.get("spam_score"),
            first_seen=item.get("first_seen") or "",
            updated_at=now,
        )
        for item in items
    }
    return _upsert(
        ReferringDomain,
        list(rows.values()),
        unique=["domain", "referring_domain"],
        update=["rank", "backlinks", "referring_pages", "spam_score", "first_seen", "updated_at"],
    )


def onboard_data_store(
    *,
    domain_id: int,
    backlinks: Sequence[Mapping[str, Any]] | None,
    keywords: Sequence[Mapping[str, Any]] | None,
    referring_domains: Sequence[Mapping[str, Any]] | None,
) -> dict[str, int]:
    """parallel-store-all: every list that was fetched (None: that branch failed or was
    skipped), upserted in one transaction."""
    now = engine_now()
    stored: dict[str, int] = {}
    with transaction.atomic():
        domain = Domain.objects.get(id=domain_id)
        if backlinks is not None:
            stored["backlinks"] = backlinks_upsert(domain=domain, items=backlinks, now=now)
        if keywords is not None:
            stored["keywords"] = keywords_upsert(domain=domain, items=keywords, now=now)
        if referring_domains is not None:
            stored["referring_domains"] = referring_domains_upsert(domain=domain, items=referring_domains, now=now)
    return stored


def domain_counters_track(*, domain_id: int, urls_queued: int, keywords_queued: int) -> dict[str, int]:
    """track-all-queued: the domain's counters from its rows, and what is queued for classification."""
    now = engine_now()
    # Three counts, not one aggregate over three joins (which multiplies the rows it reads).
    counts = {
        "b": Backlink.objects.filter(domain_id=domain_id).count(),
        "k": RankedKeyword.objects.filter(domain_id=domain_id).count(),
        "r": ReferringDomain.objects.filter(domain_id=domain_id).count(),
    }
    Domain.objects.filter(id=domain_id).update(
        backlinks_count=counts["b"],
        keywords_count=counts["k"],
        referring_domains_count=counts["r"],
        urls_queued_for_classification=urls_queued,
        keywords_queued_for_classification=keywords_queued,
        classification_started_at=now if urls_queued else None,
        updated_at=now,
    )
    return {"backlinks": counts["b"], "keywords": counts["k"], "referring_domains": counts["r"]}


def ranking_url_spam_scores_set(*, domain_id: int, scores: Mapping[str, int | None]) -> int:
    """The spam score of each ranking URL onto the keywords ranking with it (one UPDATE a batch)."""
    rows = list(RankedKeyword.objects.filter(domain_id=domain_id, url__in=list(scores)))
    for row in rows:
        row.url_spam_score = scores[row.url]
    RankedKeyword.objects.bulk_update(rows, ["url_spam_score"], batch_size=BATCH)
    return len(rows)


def keyword_intents_store(*, domain_id: int, verdicts: Mapping[str, tuple[str, str, int | None]]) -> int:
    """{keyword: (intent, source, confidence)} onto the domain's keywords: running it again with
    the same verdicts writes the same values. One UPDATE per distinct verdict (a few dozen at most:
    four intents, two sources, the confidences), not `bulk_update`, whose CASE per row took
    0.1-0.5 s for 100 keywords."""
    groups: dict[tuple[str, str, int | None], list[str]] = {}
    for keyword, verdict in verdicts.items():
        groups.setdefault(verdict, []).append(keyword)
    updated = 0
    with transaction.atomic():
        for (intent, source, confidence), keywords in groups.items():
            for start in range(0, len(keywords), BATCH):
                updated += RankedKeyword.objects.filter(
                    domain_id=domain_id, keyword__in=keywords[start : start + BATCH]
                ).update(intent=intent, intent_source=source, intent_confidence=confidence)
    return updated


def brand_properties_upsert(*, domain_id: int, found: Iterable[tuple[str, str]]) -> int:
    """(profile URL, page it was found on) pairs as brand properties of the domain."""
    now = engine_now()
    domain = Domain.objects.get(id=domain_id)
    rows: dict[str, BrandProperty] = {}
    for url, page in found:
        host = url.split("/")[2] if url.count("/") >= 2 else ""
        network = host.removeprefix("www.").split(".")[0] or "web"
        kind = BrandPropertyKind.YOUTUBE_CHANNEL if network == "youtube" else BrandPropertyKind.SOCIAL_PROFILE
        rows.setdefault(
            url,
            BrandProperty(
                tenant=domain.tenant,
                domain=domain,
                kind=kind,
                network=network,
                url=url[:500],
                found_on=page,
                updated_at=now,
            ),
        )
    _upsert(
        BrandProperty,
        list(rows.values()),
        unique=["domain", "url"],
        update=["kind", "network", "found_on", "updated_at"],
    )
    total = BrandProperty.objects.filter(domain_id=domain_id).count()
    Domain.objects.filter(id=domain_id).update(brand_properties_count=total, updated_at=now)
    return len(rows)


def classifications_store(*, domain_id: int, results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The url-classify results (each a `ClassificationResult`) onto the backlinks whose
    url_from and the keywords whose ranking URL they classify; returns their aggregate:
    counts by source stage, low-confidence and LLM-verified counts, their cost."""
    by_url = {str(r["url"]): r for r in results if r.get("url")}
    with transaction.atomic():
        backlinks = list(Backlink.objects.filter(domain_id=domain_id, url_from__in=list(by_url)))
        keywords = list(RankedKeyword.objects.filter(domain_id=domain_id, url__in=list(by_url)))
        for backlink in backlinks:
            backlink.classification, backlink.classification_source = _classified(by_url[backlink.url_from])
        for keyword in keywords:
            keyword.classification, keyword.classification_source = _classified(by_url[keyword.url])
        Backlink.objects.bulk_update(backlinks, ["classification", "classification_source"], batch_size=BATCH)
        RankedKeyword.objects.bulk_update(keywords, ["classification", "classification_source"], batch_size=BATCH)
    return classification_summary(by_url.values())


def _classified(result: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    return dict(result), str(result.get("classification_source") or "")[:20]


def classification_summary(results: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Pure: the metrics a set of ClassificationResults adds to the domain's."""
    by_source: Counter[str] = Counter()
    low = llm = 0
    cost = Decimal(0)
    for r in results:
        source = str(r.get("classification_source") or "unknown")
        by_source[source] += 1
        if float(r.get("confidence") or 0) < LOW_CONFIDENCE:
            low += 1
        if source == "llm" or "llm" in (r.get("stages_run") or []):
            llm += 1
        cost += Decimal(str(r.get("cost_usd") or 0))
    return {
        "classified": sum(by_source.values()),
        "by_source": dict(sorted(by_source.items())),
        "low_confidence_count": low,
        "llm_verified_count": llm,
        "cost_usd": str(cost),
    }


def domain_finalize(
    *, domain_id: int, status: str, metrics: Mapping[str, Any], errors: Sequence[str], cost: Decimal, classified: bool
) -> dict[str, Any]:
    """finalize: the onboarding's end, its duration, metrics, errors and cost on the domain."""
    now = engine_now()
    with transaction.atomic():
        domain = Domain.objects.select_for_update().get(id=domain_id)
        started = domain.onboard_started_at or now
        domain.onboard_status = status
        if domain.onboard_completed_at is None:
            domain.onboard_completed_at = now
            domain.onboard_duration_ms = max(0, round((now - started).total_seconds() * 1000))
        domain.metrics, domain.errors, domain.cost_usd = dict(metrics), list(errors), cost
        if classified:
            domain.classification_completed_at = now
        domain.updated_at = now
        domain.save()
    return {"status": status, "duration_ms": domain.onboard_duration_ms}


def domain_mark_failed(*, domain_id: int, error: str) -> None:
    Domain.objects.filter(id=domain_id).exclude(
        onboard_status__in=[OnboardStatus.COMPLETED, OnboardStatus.COMPLETED_WITH_ERRORS]
    ).update(onboard_status=OnboardStatus.FAILED, errors=[error], updated_at=engine_now())
