"""The workers page: live workers, their slots, what each runs now, heartbeat age (read only)."""

from __future__ import annotations

from django.http import HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from dashboard import access
from dashboard.selectors import workers as sel
from dashboard.views.common import HtmxHttpRequest, page, tenants


@require_GET
@access.require_role()
def workers(request: HtmxHttpRequest) -> HttpResponse:
    rows = sel.worker_rows(tenants=tenants(request), now=timezone.now())
    context = {
        "rows": rows,
        "live": sum(r.state == "live" for r in rows),
        "slots": sum(r.slots for r in rows if r.state == "live"),
        "busy": sum(r.busy for r in rows if r.state == "live"),
    }
    return page(request, "triggers/workers.html", context, fragment="workers")
