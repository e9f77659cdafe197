"""The RankDisco domain pages: the tenants' domains with their onboarding status, counters
and cost, and one domain's page (what onboarding found, its URLs' classifications by source
stage, its keywords' search intents, what it cost by stage). A domain of another tenant is a 404."""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.views.decorators.http import require_GET

from dashboard import access
from dashboard.query_params import QueryReader
from dashboard.views.common import HtmxHttpRequest, page, query, tenants
from ingest.rankdisco import selectors as rankdisco
from ingest.rankdisco.models import KeywordIntent, OnboardStatus

# The engine's status pills for the onboarding statuses.
PILLS = {
    "pending": "queued",
    "in_progress": "running",
    "completed": "complete",
    "completed_with_errors": "completed_with_errors",
    "failed": "errored",
}


@require_GET
@access.require_role()
def domains(request: HtmxHttpRequest) -> HttpResponse:
    visible = tenants(request)
    reader = QueryReader(request.GET)
    status, q = reader.choice("status", OnboardStatus.values), reader.text("q", max_chars=253)
    reader.done()
    rows = list(rankdisco.domain_list(tenants=visible, status=status, q=q))
    context = {
        "rows": rows,
        "status": status,
        "q": q,
        "statuses": OnboardStatus.values,
        "counts": rankdisco.domain_status_counts(tenants=visible),
        "query": query(request),
        "busy": any(d.onboard_status == OnboardStatus.IN_PROGRESS for d in rows),
        "pills": PILLS,
    }
    return page(request, "ops/domains.html", context, fragment="results")


@require_GET
@access.require_role()
def domain_detail(request: HtmxHttpRequest, domain_id: int) -> HttpResponse:
    reader = QueryReader(request.GET)
    intent = reader.choice("intent", KeywordIntent.values)
    reader.done()
    detail = rankdisco.domain_detail(tenants=tenants(request), domain_id=domain_id, intent=intent)
    if detail is None:
        raise Http404(f"no domain {domain_id} in your tenants")
    classified = sum(b + k for _, b, k in detail.by_source)
    with_intent = sum(c.keywords for c in detail.intents)
    context = {
        "d": detail,
        "domain": detail.domain,
        "classified": classified,
        "pills": PILLS,
        "sources": [
            (s, b, k, round((b + k) / classified * 100, 1) if classified else 0.0) for s, b, k in detail.by_source
        ],
        "intents": [(c, round(c.keywords / with_intent * 100, 1) if with_intent else 0.0) for c in detail.intents],
        "with_intent": with_intent,
        "busy": detail.domain.onboard_status == OnboardStatus.IN_PROGRESS
        or (detail.domain.classification_started_at is not None and detail.domain.classification_completed_at is None),
    }
    return page(request, "ops/domain_detail.html", context, fragment="body")
