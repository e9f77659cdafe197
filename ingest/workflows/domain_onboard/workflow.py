"""`domain-onboard`: what DataForSEO knows about a domain,
stored, scored, read for brand properties, and its URLs classified.

    search-attributes                             (version 2) domain, and domain_id when the params carry it
    ensure-domain                       quick     the tenant's domain row (created when missing)
    search-attributes                             (version 2) domain_id, when ensure-domain created or found it
    initialize                          quick     onboard_status in_progress; the instance's hourly budget
    parallel-fetch-all                  patient   fetch-backlinks, fetch-keywords, fetch-referring-domains in
                                                  parallel, all settled: a failed branch is recorded, the rest go on
    parallel-store-all                  default   bulk upserts of every list fetched
    track-all-queued                    quick     the domain's counters, what is queued for classification
    fetch-ranking-url-spam-scores       default   bulk_spam_score, 1,000 ranking URLs a call
    discover-ranking-domain-properties  quick     YouTube channels and social profiles the domain's pages link to
    keyword-intent-rules                quick     (version 3) each ranked keyword's search intent by its words
    keyword-intent-llm-<n>              default   (version 3) what the rules left undecided, 50 keywords a call to
                                                  the tenant's LLM, in parallel, all settled
    finalize                            default   onboard_status completed (or completed_with_errors), duration
    queue-domain-classification         fan-out   backlink and ranking URLs, one `url-classify` instance each
    store-classifications               default   the ClassificationResults onto the rows and the domain's metrics

Outcome: a `WorkflowResult` with the onboarding's metrics; `completed_with_errors` when a branch
failed. A 402xx (DataForSEO balance) pauses the instance for an operator; a budget breach
pauses it with an approval request (the budgets' approval policy).
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db.models import Sum

from ingest.engine import (
    InstanceAlreadyExists,
    InvalidParams,
    NonRetryableError,
    Workflow,
    WorkflowEvent,
    WorkflowResult,
    create,
    workflow_names,
)
from ingest.engine.models import ApiCost, Budget
from ingest.engine.services.budgets import budget_upsert
from ingest.rankdisco import services
from ingest.rankdisco.models import OnboardStatus
from ingest.workflows.common import DEFAULT_RETRIES, PATIENT_RETRIES, QUICK_RETRIES, id_part
from ingest.workflows.domain_onboard.intents import intent_llm_step, intent_rules_step
from ingest.workflows.domain_onboard.steps import (
    INSTANCE_HOURLY_LIMIT,
    WORKFLOW,
    brand_pages,
    discover_properties,
    failure_text,
    fetch_backlinks,
    fetch_keywords,
    fetch_referring_domains,
    instance_budget_ensure,
    spam_scores,
)
from ingest.workflows.search_attributes import searchable
from ingest.workflows.sharing import FAIR_KEY, LIVE_PRIORITY, tenant_concurrency, tenant_overrides

if TYPE_CHECKING:
    from ingest.engine import StepApi

CLASSIFIER = "url-classify"
# URLs per url-classify carrier instance (step.fan_out's `pack`): each URL's stages are steps of
# its carrier, so a URL costs its steps, not an instance; a URL waiting out an LLM backoff holds
# up the URLs after it in its carrier only, and ~200 URLs a domain still spread over 10 carriers.
CLASSIFY_PACK = 20
LIMITS = ("backlink_limit", "keyword_limit", "referring_domains_limit")
SKIPS = (
    "skip_backlinks",
    "skip_keywords",
    "skip_referring_domains",
    "skip_brand_properties",
    "skip_ranking_domain_properties",
    "skip_keyword_intent",
)
MAX_LIMIT = 1000  # one DataForSEO live task returns at most 1,000 items


def onboard_params(raw: dict[str, Any]) -> dict[str, Any]:
    """The workflow's params with their defaults; InvalidParams says what is wrong."""
    try:
        domain = services.domain_name_normalize(str(raw.get("domain") or ""))
    except services.InvalidDomain as error:
        raise InvalidParams(f"domain-onboard: {error}") from None
    params: dict[str, Any] = {"domain": domain, "domain_id": raw.get("domain_id")}
    if params["domain_id"] is not None and (
        isinstance(params["domain_id"], bool) or not isinstance(params["domain_id"], int)
    ):
        raise InvalidParams(f"domain-onboard: domain_id must be an integer, got {params['domain_id']!r}")
    for name in LIMITS:
        value = raw.get(name, 100)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
            raise InvalidParams(f"domain-onboard: {name} must be an integer from 1 to {MAX_LIMIT}, got {value!r}")
        params[name] = value
    for name in SKIPS:
        value = raw.get(name, False)
        if not isinstance(value, bool):
            raise InvalidParams(f"domain-onboard: {name} must be true or false, got {value!r}")
        params[name] = value
    cap = raw.get("max_cost_per_hour", str(INSTANCE_HOURLY_LIMIT))
    try:
        params["max_cost_per_hour"] = str(Decimal(str(cap)).quantize(Decimal("0.01")))
    except ArithmeticError:
        raise InvalidParams(f"domain-onboard: max_cost_per_hour must be a number, got {cap!r}") from None
    return params


DATAFORSEO_DAILY_LIMIT = Decimal("10.00")  # all DataForSEO spend, per day


def dataforseo_budget_ensure(*, actor: str, limit: Decimal = DATAFORSEO_DAILY_LIMIT) -> bool:
    """The `dataforseo daily $10` budget (service scope, approval policy: a breach
    pauses the onboarding for an operator), created once; True when created now."""
    if Budget.objects.filter(scope="service", key="dataforseo", period="day").exists():
        return False
    budget_upsert(scope="service", key="dataforseo", period="day", limit=limit, policy="approval", actor=actor)
    return True


def _unique(urls: list[str]) -> list[str]:
    return list(dict.fromkeys(u for u in urls if u))


def instance_spend(instance_id: str) -> Decimal:
    return ApiCost.objects.filter(instance_id=instance_id).aggregate(total=Sum("cost"))["total"] or Decimal(0)


class DomainOnboard(Workflow):
    name = WORKFLOW
    concurrency_key = FAIR_KEY  # tenants served round robin (ingest/workflows/sharing.py)
    concurrency = tenant_concurrency(WORKFLOW)
    concurrency_overrides = tenant_overrides(WORKFLOW)
    # 2: "search-attributes" around ensure-domain; 3: the keyword-intent steps before finalize
    # (docs/engine-contract.md, "Versions")
    version = 3

    def run(self, event: WorkflowEvent, step: StepApi) -> WorkflowResult:
        p = onboard_params(dict(event.payload))
        tenant, iid, name = event.tenant, event.instance_id, p["domain"]
        errors: list[str] = []
        metrics: dict[str, int | float] = {}
        if step.version_at_least(2):  # before anything is fetched or paid for
            step.set_search_attributes(**searchable(domain=name, domain_id=p["domain_id"]))

        def ensure(ctx: Any) -> int:
            try:
                return services.domain_ensure(tenant=tenant, name=name, domain_id=p["domain_id"]).id
            except services.DomainNotFound as error:
                raise NonRetryableError.wrap(
                    error, f"{error}; start the onboarding without domain_id to create it"
                ) from None

        domain_id: int = step.do("ensure-domain", ensure, retries=QUICK_RETRIES)
        if step.version_at_least(2) and p["domain_id"] is None:
            # the id its url-classify children carry: `domain_id:<id>` finds the onboarding and them
            step.set_search_attributes(domain_id=domain_id)

        def initialize(ctx: Any) -> dict[str, Any]:
            instance_budget_ensure(instance_id=iid, limit=Decimal(p["max_cost_per_hour"]))
            return services.domain_onboard_begin(domain_id=domain_id, instance_id=iid)

        step.do("initialize", initialize, retries=QUICK_RETRIES)

        fetched = self.fetch_all(step, p, errors)
        backlinks, keywords, referring = (fetched.get(k) for k in ("backlinks", "keywords", "referring_domains"))
        metrics |= {f"{k}_fetched": len(v or []) for k, v in fetched.items()}

        step.do(
            "parallel-store-all",
            lambda ctx: services.onboard_data_store(
                domain_id=domain_id, backlinks=backlinks, keywords=keywords, referring_domains=referring
            ),
            retries=DEFAULT_RETRIES,
        )

        backlink_urls = _unique([b["url_from"] for b in backlinks or []])
        ranking_urls = _unique([k["url"] or "" for k in keywords or []])

        def track(ctx: Any) -> dict[str, Any]:
            # Whether a classifier is deployed is decided here, once, and kept with the step's
            # result: a deploy that adds or removes url-classify later does not change the path
            # of a run already past this step. Until one is deployed, URLs stay unclassified.
            classify = CLASSIFIER in workflow_names()
            counters = services.domain_counters_track(
                domain_id=domain_id,
                urls_queued=len(backlink_urls) if classify else 0,
                keywords_queued=len(ranking_urls) if classify else 0,
            )
            return {**counters, "classify": classify}

        tracked = step.do("track-all-queued", track, retries=QUICK_RETRIES)
        # A run that recorded this step before its result carried the decision reads the registry.
        classify = bool(tracked["classify"]) if "classify" in tracked else CLASSIFIER in workflow_names()

        if ranking_urls:
            try:
                scored = step.do(
                    "fetch-ranking-url-spam-scores",
                    lambda ctx: spam_scores(ctx, domain_id=domain_id, domain=name, urls=ranking_urls),
                    retries=DEFAULT_RETRIES,
                )
                metrics["ranking_urls_spam_scores"] = scored["scored"]
            except Exception as error:  # noqa: BLE001 - allSettled: recorded, the rest go on
                errors.append(f"Spam score fetch failed: {failure_text(error)}")

        pages = brand_pages(
            name, ranking_urls, home=not p["skip_brand_properties"], ranking=not p["skip_ranking_domain_properties"]
        )
        if pages:
            try:
                metrics |= step.do(
                    "discover-ranking-domain-properties",
                    lambda ctx: discover_properties(ctx, domain_id=domain_id, domain=name, pages=pages),
                    retries=QUICK_RETRIES,
                )
            except Exception as error:  # noqa: BLE001
                errors.append(f"Brand property discovery failed: {failure_text(error)}")

        if keywords and not p["skip_keyword_intent"] and step.version_at_least(3):
            metrics |= self.classify_intents(
                step,
                domain_id=domain_id,
                domain=name,
                errors=errors,
                keywords=_unique([str(k["keyword"])[:500] for k in keywords]),
            )

        step.do(
            "finalize",
            lambda ctx: services.domain_finalize(
                domain_id=domain_id,
                status=OnboardStatus.COMPLETED_WITH_ERRORS if errors else OnboardStatus.COMPLETED,
                metrics=metrics,
                errors=errors,
                cost=instance_spend(iid),
                classified=False,
            ),
            retries=DEFAULT_RETRIES,
        )

        if classify and (backlink_urls or ranking_urls):
            self.classify(
                step,
                domain_id=domain_id,
                urls=_unique(backlink_urls + ranking_urls),
                backlink_urls=set(backlink_urls),
                ranking_urls=set(ranking_urls),
                metrics=metrics,
                errors=errors,
                instance_id=iid,
            )
        return WorkflowResult(success=not errors, metrics=metrics, errors=errors)

    def fetch_all(self, step: StepApi, p: dict[str, Any], errors: list[str]) -> dict[str, list[dict[str, Any]] | None]:
        """parallel-fetch-all: the three DataForSEO lists at once, each its own step; a branch
        that failed is None (recorded in `errors`), a skipped one is absent."""
        name = p["domain"]
        branches = [
            (
                "backlinks",
                "fetch-backlinks",
                "skip_backlinks",
                "Backlink",
                lambda ctx: fetch_backlinks(ctx, domain=name, limit=p["backlink_limit"]),
            ),
            (
                "keywords",
                "fetch-keywords",
                "skip_keywords",
                "Keyword",
                lambda ctx: fetch_keywords(ctx, domain=name, limit=p["keyword_limit"]),
            ),
            (
                "referring_domains",
                "fetch-referring-domains",
                "skip_referring_domains",
                "Referring domain",
                lambda ctx: fetch_referring_domains(ctx, domain=name, limit=p["referring_domains_limit"]),
            ),
        ]
        wanted = [b for b in branches if not p[b[2]]]
        settled = (
            step.all_settled([step.call(b[1], b[4], retries=PATIENT_RETRIES, timeout="2 minutes") for b in wanted])
            if wanted
            else []
        )
        fetched: dict[str, list[dict[str, Any]] | None] = {}
        for (key, _, _, label, _), outcome in zip(wanted, settled, strict=True):
            if outcome.ok:
                fetched[key] = outcome.value
            else:
                fetched[key] = None
                errors.append(f"{label} fetch failed: {failure_text(outcome.error)}")
        return fetched

    def classify_intents(
        self, step: StepApi, *, domain_id: int, domain: str, keywords: list[str], errors: list[str]
    ) -> dict[str, int | float]:
        """keyword-intent-rules, then keyword-intent-llm-<n> for what the rules left undecided
        (when the tenant has an LLM), a batch each, all settled: a failed batch is recorded and
        its keywords keep the rules' guess. Before finalize, so their cost is the onboarding's."""
        try:
            ruled = step.do(
                "keyword-intent-rules",
                lambda ctx: intent_rules_step(ctx, domain_id=domain_id, domain=domain, keywords=keywords),
                retries=QUICK_RETRIES,
            )
        except Exception as error:  # noqa: BLE001 - allSettled: recorded, the rest go on
            errors.append(f"Keyword intent failed: {failure_text(error)}")
            return {}
        undecided: list[str] = list(ruled["undecided"])
        size = int(ruled["batch"])  # as recorded: a deploy that changes the size keeps a run's step names
        batches = [undecided[i : i + size] for i in range(0, len(undecided), size)] if ruled["llm"] else []

        def ask(batch: list[str]) -> Any:
            return lambda ctx: intent_llm_step(ctx, domain_id=domain_id, domain=domain, keywords=batch)

        settled = (
            step.all_settled(
                [
                    step.call(f"keyword-intent-llm-{n}", ask(batch), retries=DEFAULT_RETRIES, timeout="2 minutes")
                    for n, batch in enumerate(batches, 1)
                ]
            )
            if batches
            else []
        )
        answered = [s.value for s in settled if s.ok]
        failed = [(batch, s.error) for batch, s in zip(batches, settled, strict=True) if not s.ok]
        if failed:
            errors.append(
                f"Keyword intent failed for {sum(len(b) for b, _ in failed)} of {len(undecided)} "
                f"keywords the rules left undecided: {failure_text(failed[0][1])}"
            )
        by_llm = sum(int(a["classified"]) for a in answered)
        return {
            "keyword_intents_by_rules": int(ruled["decided"]),
            "keyword_intents_by_llm": by_llm,
            "keyword_intents_known": int(ruled.get("known", 0)),
            "keyword_intents_undecided": len(undecided) - by_llm,
            "keyword_intent_cost_usd": float(sum((Decimal(a["cost"]) for a in answered), Decimal(0))),
        }

    def classify(
        self,
        step: StepApi,
        *,
        domain_id: int,
        urls: list[str],
        backlink_urls: set[str],
        ranking_urls: set[str],
        metrics: dict[str, int | float],
        errors: list[str],
        instance_id: str,
    ) -> None:
        """queue-domain-classification: url-classify for every URL (a fan-out, CLASSIFY_PACK URLs
        a carrier instance); then
        store-classifications: their ClassificationResults onto the rows, and into the
        domain's metrics (counts by source stage, low confidence, LLM verified) and cost."""
        items = [{"url": url, "domain_id": domain_id} for url in urls]
        settled = step.fan_out(
            "queue-domain-classification", CLASSIFIER, items, timeout="30 minutes", pack=CLASSIFY_PACK
        )
        results = [s.value for s in settled if s.ok and isinstance(s.value, dict)]
        failed = [(url, s.error) for url, s in zip(urls, settled, strict=True) if not s.ok]
        if failed:
            errors.append(
                f"URL classification failed for {len(failed)} of {len(urls)} URLs, "
                f"first {failed[0][0]}: {failure_text(failed[0][1])}"
            )
        done = {str(r.get("url")) for r in results}
        metrics |= {"backlinks_classified": len(done & backlink_urls), "keywords_classified": len(done & ranking_urls)}

        def store(ctx: Any) -> dict[str, Any]:
            summary = services.classifications_store(domain_id=domain_id, results=results)
            metrics.update(classification_metrics(summary))
            services.domain_finalize(
                domain_id=domain_id,
                metrics=metrics,
                errors=errors,
                classified=True,
                status=OnboardStatus.COMPLETED_WITH_ERRORS if errors else OnboardStatus.COMPLETED,
                cost=instance_spend(instance_id) + Decimal(summary["cost_usd"]),
            )
            return summary

        metrics.update(classification_metrics(step.do("store-classifications", store, retries=DEFAULT_RETRIES)))


def classification_metrics(summary: dict[str, Any]) -> dict[str, int | float]:
    return {
        "low_confidence_count": summary["low_confidence_count"],
        "llm_verified_count": summary["llm_verified_count"],
        "classification_cost_usd": float(summary["cost_usd"]),
        **{f"classified_by_{source}": count for source, count in summary["by_source"].items()},
    }


def onboard_instance_id(tenant: str, domain: str, *, run: str = "") -> str:
    base = f"onboard-{id_part(tenant)}-{id_part(domain)}"
    return f"{base}-{id_part(run)}"[:100] if run else base[:100]


def domain_onboard_start(
    tenant: str, domain: str, *, run: str = "", actor: str = "", priority: int = LIVE_PRIORITY, **options: Any
) -> tuple[str, bool]:
    """Start `domain-onboard` for a domain; (instance id, created). The same `run` twice is
    already processed; a new `run` onboards the domain again (its rows are upserted)."""
    params = onboard_params({"domain": domain, **options})
    instance_id = onboard_instance_id(tenant, params["domain"], run=run)
    try:
        create(WORKFLOW, id=instance_id, params=params, tenant=tenant, actor=actor, priority=priority)
    except InstanceAlreadyExists:
        return instance_id, False
    return instance_id, True
