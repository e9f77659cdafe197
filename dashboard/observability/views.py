"""/metrics, /healthz and /readyz: plain function views for scrapers and load balancers."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from dashboard.observability import collector, guard, health, tally
from dashboard.observability.ingress import counts

log = logging.getLogger("runledger.observability")

ADVANCE_EVERY = 10.0  # seconds between a process's attempts to store the tally's new rows
ADVANCE_BATCH = 5_000  # rows a scrape stores at most (manage.py metrics_tally does bulk catch-ups)
_advanced_at = 0.0


def _advance() -> None:
    global _advanced_at
    if time.monotonic() - _advanced_at < ADVANCE_EVERY:
        return
    _advanced_at = time.monotonic()
    try:
        tally.tally_advance(now=timezone.now(), batch=ADVANCE_BATCH)
    except Exception:  # noqa: BLE001 - the scrape still answers: it folds the rows itself
        log.warning("metrics tally could not advance", exc_info=True)


@require_GET
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    refusal = guard.check_request(request)
    if refusal is not None:
        response = JsonResponse({"error": {"code": refusal.code, "message": refusal.message}}, status=refusal.status)
        if refusal.status == 401:
            response["WWW-Authenticate"] = "Bearer"
        return response
    counts.flush()
    _advance()
    return HttpResponse(collector.exposition(), content_type=CONTENT_TYPE_LATEST)


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """The process answers; nothing else is looked at (no database)."""
    return JsonResponse({"status": "ok"})


@require_GET
@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    seconds = settings.RUNLEDGER_READY_WORKER_SECONDS
    within = timedelta(seconds=seconds) if seconds > 0 else None
    try:
        checks = health.readiness(now=timezone.now(), worker_within=within)
    except Exception as exc:  # noqa: BLE001 - the database went away between two checks
        checks = [health.Check("database", False, f"{type(exc).__name__}: {str(exc).strip()[:200]}")]
    ready = all(c.ok for c in checks)
    body = {
        "status": "ready" if ready else "unavailable",
        "checks": {c.name: {"ok": c.ok, "detail": c.detail} for c in checks},
    }
    return JsonResponse(body, status=200 if ready else 503)
