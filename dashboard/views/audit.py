"""The Audit page: every operator action of the user's tenants (dashboard, API, command line),
newest first, filterable by action, actor, source and tenant, paginated by id."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from dashboard import access
from dashboard.models import AuditSource
from dashboard.query_params import QueryReader
from dashboard.selectors.audit import AuditFilters, audit_actions, audit_page
from dashboard.views.common import HtmxHttpRequest, page, sees_global, tenants


@require_GET
@access.require_role()
def audit(request: HtmxHttpRequest) -> HttpResponse:
    f = AuditFilters.from_query(request.GET)
    reader = QueryReader(request.GET)
    before = reader.integer("before", default=0, low=1, high=2**63 - 1) or None
    reader.done()
    mine, see_global = tenants(request), sees_global(request)
    result = audit_page(tenants=mine, see_global=see_global, filters=f, before=before)
    base = urlencode(f.as_params())
    context = {
        "f": f,
        "rows": result.rows,
        "tenants": mine,
        "sources": AuditSource.choices,
        "actions": audit_actions(tenants=mine, see_global=see_global),
        "next_url": "?" + "&".join(p for p in (base, urlencode({"before": result.next_before})) if p)
        if result.next_before
        else "",
        "first_url": f"?{base}" if base and request.GET.get("before") else ("?" if request.GET.get("before") else ""),
    }
    return page(request, "ops/audit.html", context, fragment="results")
