"""The URL classifications page: what url-classify decided for each URL of the user's tenants,
newest first, filterable by domain, deciding stage and tenant, with the count per stage."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from dashboard import access
from dashboard.query_params import QueryReader
from dashboard.views.common import HtmxHttpRequest, page, tenants
from ingest.classify.models import ClassificationSource
from ingest.classify.selectors import classification_list

PER_PAGE = 100


@require_GET
@access.require_role()
def classifications(request: HtmxHttpRequest) -> HttpResponse:
    reader = QueryReader(request.GET)
    host, tenant = reader.text("domain", max_chars=253), reader.text("tenant", max_chars=100)
    source = reader.choice("source", ClassificationSource.values)
    number = reader.integer("page", default=1, low=1, high=99_999)
    reader.done()
    mine = tenants(request)
    # A tenant outside the user's own selects nothing, never everything.
    selected = [tenant] if tenant in mine else [] if tenant else mine
    result = classification_list(tenants=selected, host=host, source=source, limit=PER_PAGE,
                                 offset=(number - 1) * PER_PAGE)  # fmt: skip
    base = {k: v for k, v in {"domain": host, "source": source, "tenant": tenant}.items() if v}
    context = {
        "rows": result.rows,
        "total": result.total,
        "tenants": mine,
        "stage_counts": [
            (value, label, result.by_source.get(value, 0)) for value, label in ClassificationSource.choices
        ],
        "sources": ClassificationSource.choices,
        "f": {"domain": host, "source": source, "tenant": tenant},
        "next_url": "?" + urlencode({**base, "page": number + 1}) if number * PER_PAGE < result.total else "",
        "prev_url": "?" + urlencode({**base, "page": number - 1}) if number > 1 else "",
    }
    return page(request, "ops/classifications.html", context, fragment="results")
