"""The workflows pages: every workflow type's summary, and one workflow's step DAG with its heat."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from dashboard import access
from dashboard import selectors as sel
from dashboard.live import ops_pages as live_pages
from dashboard.views.common import HtmxHttpRequest, page, tenants

WINDOWS = ("1h", "24h", "7d")


def _window(request: HttpRequest) -> str:
    w = request.GET.get("window", "24h")
    return w if w in WINDOWS else "24h"


@require_GET
@access.require_role()
def workflows(request: HtmxHttpRequest) -> HttpResponse:
    window, now = _window(request), timezone.now()
    rows = sel.workflow_summaries(tenants=tenants(request), since=sel.window_start(window, now=now))
    return page(request, "ops/workflows.html", {"rows": rows, "window": window, "windows": WINDOWS},
                fragment="results")


@require_GET
@access.require_role()
def workflow_dag(request: HtmxHttpRequest, name: str) -> HttpResponse:
    context = live_pages.workflow_dag_context(request.user, request.GET, name=name)
    if context is None:
        raise Http404("no runs of this workflow in your tenants")
    return page(request, "ops/workflow_dag.html", context, fragment="dag")
