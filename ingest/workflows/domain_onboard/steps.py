"""The step bodies of `domain-onboard`: each takes the step's `ctx` and plain values and
returns JSON. Every paid call reserves its estimate on the budgets first (`ctx.check_budget`)
and records what the provider reported (`ctx.track_cost`), with the cost service's name, the
stage and the domain in the cost row's metadata; a failed task that DataForSEO billed is
recorded too, as unsuccessful."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from ingest.classify.signals import content_signals
from ingest.engine import AwaitApproval, NonRetryableError
from ingest.engine.models import Budget
from ingest.engine.services.budgets import budget_upsert
from ingest.rankdisco import services
from ingest.sources.dataforseo import DataForSEOClient, spam_score_batches
from ingest.sources.dataforseo_errors import DataForSEOError
from ingest.sources.seo_services import (
    DATAFORSEO_BACKLINKS,
    DATAFORSEO_KEYWORDS,
    DATAFORSEO_REFERRING_DOMAINS,
    DATAFORSEO_SPAM_SCORE,
    ZENROWS_BASIC,
    ZENROWS_PREMIUM,
    CostService,
    PaidCall,
)
from ingest.sources.zenrows import ZenRowsError, fetch_cascade
from ingest.workflows.domain_onboard.clients import clients

WORKFLOW = "domain-onboard"
INSTANCE_HOURLY_LIMIT = Decimal("1.00")  # $1 max spend per instance an hour
PAGES_PER_ONBOARD = 5  # the domain's ranking pages read for brand properties, besides its home page


def operator_needed(message: str) -> AwaitApproval:
    """Only a person can fix this (a DataForSEO balance to top up): the engine pauses the
    instance on this signal (it matches the class by name, so it is not subclassed), and the
    step runs again when an operator resumes it, as after a budget breach."""
    return AwaitApproval(f"{message} (instance paused for an operator: resume it once that is fixed)")


def paid(
    ctx: Any, *, service: CostService, items: int, stage: str, domain: str, call: Callable[[], PaidCall[Any]]
) -> PaidCall[Any]:
    """Reserve, call, record: one paid DataForSEO call as a step makes it."""
    ctx.check_budget(service.service, service.estimate(items=items))
    meta = {"stage": stage, "domain": domain}
    try:
        made = call()
    except DataForSEOError as error:
        if error.cost:
            ctx.track_cost(
                service.service,
                cost=error.cost,
                model=service.model,
                success=False,
                metadata={"cost_service": service.name, **meta, "error": type(error).__name__},
            )
        if error.needs_operator:
            raise operator_needed(str(error)) from error
        raise error if error.retryable else NonRetryableError.wrap(error) from error
    kwargs = made.track_cost_kwargs()
    kwargs["metadata"] |= meta
    ctx.track_cost(kwargs.pop("service"), **kwargs)
    return made


def instance_budget_ensure(*, instance_id: str, limit: Decimal) -> None:
    """The instance's hourly budget, created once: a replay must not
    undo an operator's raise. Its breach pauses the instance for approval."""
    if not Budget.objects.filter(scope="instance", key=instance_id, period="hour").exists():
        budget_upsert(scope="instance", key=instance_id, period="hour", limit=limit, policy="approval", actor=WORKFLOW)


def _dfs(ctx: Any) -> DataForSEOClient:
    return clients(ctx.tenant).dataforseo


def fetch_backlinks(ctx: Any, *, domain: str, limit: int) -> list[dict[str, Any]]:
    made = paid(
        ctx,
        service=DATAFORSEO_BACKLINKS,
        items=limit,
        stage="backlinks",
        domain=domain,
        call=lambda: _dfs(ctx).backlinks(domain, limit=limit),
    )
    return [asdict(item) for item in made.result.items]


def fetch_keywords(ctx: Any, *, domain: str, limit: int) -> list[dict[str, Any]]:
    made = paid(
        ctx,
        service=DATAFORSEO_KEYWORDS,
        items=limit,
        stage="keywords",
        domain=domain,
        call=lambda: _dfs(ctx).ranked_keywords(domain, limit=limit),
    )
    return [asdict(item) for item in made.result.items]


def fetch_referring_domains(ctx: Any, *, domain: str, limit: int) -> list[dict[str, Any]]:
    made = paid(
        ctx,
        service=DATAFORSEO_REFERRING_DOMAINS,
        items=limit,
        stage="referring_domains",
        domain=domain,
        call=lambda: _dfs(ctx).referring_domains(domain, limit=limit),
    )
    return [asdict(item) for item in made.result.items]


def spam_scores(ctx: Any, *, domain_id: int, domain: str, urls: Sequence[str]) -> dict[str, Any]:
    """bulk_spam_score for the ranking URLs (1,000 targets a call), stored on the keywords."""
    scores: dict[str, int | None] = {}
    for batch in spam_score_batches(list(urls)):

        def call(batch: list[str] = batch) -> PaidCall[Any]:
            return _dfs(ctx).bulk_spam_score(batch)

        made = paid(ctx, service=DATAFORSEO_SPAM_SCORE, items=len(batch), stage="spam_scores", domain=domain, call=call)
        scores |= {item.target: item.spam_score for item in made.result.items}
    services.ranking_url_spam_scores_set(domain_id=domain_id, scores=scores)
    return {"scored": sum(1 for s in scores.values() if s is not None), "calls": len(spam_score_batches(list(urls)))}


def brand_pages(domain: str, ranking_urls: Sequence[str], *, home: bool, ranking: bool) -> list[str]:
    """The domain's pages read for brand properties: its home page, then its ranking pages."""
    pages = [f"https://{domain}/"] if home else []
    if ranking:
        for url in ranking_urls:
            host = (urlsplit(url).hostname or "").removeprefix("www.")
            if host == domain and url not in pages and len(pages) < PAGES_PER_ONBOARD + int(home):
                pages.append(url)
    return pages


def discover_properties(ctx: Any, *, domain_id: int, domain: str, pages: Sequence[str]) -> dict[str, Any]:
    """Read each page the cheapest way that works (native, then ZenRows when configured) and keep
    the YouTube channels and social profiles it links to as the domain's brand properties."""
    made = clients(ctx.tenant)
    found: list[tuple[str, str]] = []
    scraped = 0
    for page in pages:
        if made.zenrows is not None:
            ctx.check_budget(ZENROWS_BASIC.service, ZENROWS_BASIC.estimate(items=1) + ZENROWS_PREMIUM.estimate(items=1))
        try:
            result = fetch_cascade(page, native=made.native, zenrows=made.zenrows)
        except ZenRowsError as error:
            if error.needs_operator:
                raise operator_needed(str(error)) from error
            raise error if error.retryable else NonRetryableError.wrap(error) from error
        for call in result.paid:
            kwargs = call.track_cost_kwargs()
            kwargs["metadata"] |= {"stage": "brand_properties", "domain": domain, "url": page}
            ctx.track_cost(kwargs.pop("service"), **kwargs)
        if result.page is None:
            continue
        scraped += 1
        found += [(profile, page) for profile in content_signals(result.page.html).social_profiles]
    stored = services.brand_properties_upsert(domain_id=domain_id, found=found)
    youtube = sum(1 for url, _ in dict(found).items() if "youtube.com" in url)
    return {
        "brand_properties_found": stored,
        "youtube_channels_resolved": youtube,
        "social_profiles_resolved": stored - youtube,
        "ranking_domains_scraped": scraped,
    }


def failure_text(error: BaseException | None) -> str:
    """A failed branch as the errors list of the WorkflowResult says it: named by what failed
    (a permanent DataForSEO error comes wrapped in NonRetryableError, carrying its own name)."""
    name = getattr(error, "error_name", None) or type(error).__name__
    return f"{str(name).rsplit('.', 1)[-1]}: {error}"
