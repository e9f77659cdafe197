"""GET /api/metrics: per-workflow figures for programs (optionally one workflow), in the caller's tenants."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Query, Router, Schema

from dashboard import access
from dashboard.api.errors import ApiProblem
from dashboard.api.schemas import ErrorOut
from dashboard.observability import summary
from ingest.engine import workflow_names

router = Router(tags=["metrics"])
# 1 minute to 90 days, as summary.parse_window reads it: 1-129600m, 1-2160h or 1-90d.
WINDOW_PATTERN = (
    r"^(?:(?:[1-9][0-9]{0,4}|1[01][0-9]{4}|12[0-8][0-9]{3}|129[0-5][0-9]{2}|129600)m"
    r"|(?:[1-9][0-9]{0,2}|1[0-9]{3}|20[0-9]{2}|21[0-5][0-9]|2160)h|(?:[1-9]|[1-8][0-9]|90)d)$"
)


class WorkflowMetricsOut(Schema):
    workflow: str
    counts: dict[str, int]
    started_per_minute: float
    finished_per_minute: float
    error_rate: float | None
    p50_seconds: float | None
    p95_seconds: float | None
    cost_usd: Decimal
    cost_calls: int


class MetricsOut(Schema):
    window: str
    since: str
    until: str
    tenants: list[str]
    workflows: list[WorkflowMetricsOut]


class MetricsQuery(Schema):
    workflow: str | None = None
    # Declared, not enforced here: parse_window's refusal (400) names what is wrong.
    window: str = Field("24h", json_schema_extra={"pattern": WINDOW_PATTERN})


@router.get(
    "",
    response={200: MetricsOut, 400: ErrorOut, 401: ErrorOut, 404: ErrorOut},
    summary="Per workflow over a window: counts by outcome, rates, p50/p95 durations, cost",
)
def metrics_get(request: HttpRequest, q: Query[MetricsQuery]) -> dict[str, Any]:
    workflow, window = q.workflow, q.window
    try:
        span = summary.parse_window(window)
    except summary.InvalidWindow as exc:
        raise ApiProblem(400, "invalid_window", str(exc)) from None
    if workflow is not None and workflow not in workflow_names():
        raise ApiProblem(
            404, "workflow_not_found", f"no workflow is registered as {workflow[:200]!r}; GET /api/workflows lists them"
        )
    tenants = access.tenants_for(request.user)
    now = timezone.now()
    figures = summary.workflow_metrics(tenants=tenants, now=now, window=span, workflow=workflow)
    return {
        "window": window.strip(),
        "since": (now - span).isoformat(),
        "until": now.isoformat(),
        "tenants": tenants,
        "workflows": [vars(f) for f in figures],
    }
