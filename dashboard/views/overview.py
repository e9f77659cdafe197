"""The overview page: counts, throughput, steps in flight, what needs an operator today."""

from __future__ import annotations

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from dashboard import access
from dashboard.live import ops_pages as live_pages
from dashboard.views.common import HtmxHttpRequest, page


@require_GET
@access.require_role()
def overview(request: HtmxHttpRequest) -> HttpResponse:
    return page(request, "ops/overview.html", live_pages.overview_context(request.user, request.GET), fragment="live")
