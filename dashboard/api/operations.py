"""/api/events, /api/costs, /api/budgets (dead letters: dead_letters.py)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Query, Router, Schema, Status

from dashboard import access
from dashboard.api import schemas as s
from dashboard.api import selectors
from dashboard.api.audit import acted
from dashboard.api.auth import actor, require_act
from dashboard.api.errors import ApiProblem
from dashboard.selectors.budgets import BudgetRow, budget_rows
from ingest.engine.models import Budget, BudgetScope, Instance
from ingest.engine.services import budgets as engine_budgets
from ingest.triggers.services import event_publish

router = Router()


@router.post(
    "/events",
    response={202: s.PublishOut, **s.ERRORS},
    tags=["events"],
    summary="Publish a named event: starts subscribed workflows; idempotent by id",
)
def event_publish_view(request: HttpRequest, body: s.PublishIn) -> Status[dict[str, Any]]:
    require_act(request.user, body.tenant)
    if body.instance_id:
        target = Instance.objects.filter(pk=body.instance_id).values_list("tenant", flat=True).first()
        if target != body.tenant:
            raise ApiProblem(
                404,
                "instance_not_found",
                f"no instance {body.instance_id!r} in tenant {body.tenant!r}; events are delivered within one tenant",
            )
    published = acted(
        request,
        action="event.publish",
        tenants=[body.tenant],
        selection={"type": body.type, "id": body.id, "instance_id": body.instance_id},
        run=lambda: event_publish(
            type=body.type,
            data=body.data,
            id=body.id,
            tenant=body.tenant,
            instance_id=body.instance_id,
            actor=actor(request.user),
            now=timezone.now(),
        ),
    )
    return Status(
        202,
        {
            "event_id": published.event_id,
            "started": published.started,
            "delivered": published.delivered,
            "duplicate": published.duplicate,
        },
    )


class CostFilters(Schema):
    since: s.Moment | None = None
    until: s.Moment | None = None
    tenant: str | None = None
    service: str | None = None
    workflow: str | None = None
    instance_id: str | None = None
    limit: int = 50


@router.get(
    "/costs",
    response={200: s.CostsOut, **s.ERRORS},
    tags=["costs"],
    summary="Spend: totals by service and the latest api_costs rows",
)
def cost_list(request: HttpRequest, filters: Query[CostFilters]) -> dict[str, Any]:
    return selectors.cost_summary(tenants=access.tenants_for(request.user), **filters.dict())


@router.get(
    "/budgets",
    response={200: list[BudgetRow], **s.ERRORS},
    tags=["budgets"],
    summary="Budgets in the caller's tenants and the global ones, with spend and forecast",
)
def budget_list(request: HttpRequest) -> list[BudgetRow]:
    return budget_rows(budgets=selectors.budget_list(tenants=access.tenants_for(request.user)), now=timezone.now())


def _require_budget_write(request: HttpRequest, scope: str, key: str) -> list[str]:
    """The budget's tenants (none for global scopes) once the caller may write it."""
    if scope == BudgetScope.TENANT:
        require_act(request.user, key)
        return [key]
    if scope == BudgetScope.INSTANCE:
        tenant = Instance.objects.filter(pk=key).values_list("tenant", flat=True).first()
        if tenant is None or not access.can_read(request.user, tenant):
            raise ApiProblem(404, "instance_not_found", f"no instance {key[:100]!r} is visible")
        require_act(request.user, tenant)
        return [tenant]
    if not request.user.is_staff:
        raise ApiProblem(
            403, "forbidden", f"{scope} budgets span every tenant; setting one needs an admin (staff) user"
        )
    return []


@router.put(
    "/budgets",
    response={200: BudgetRow, **s.ERRORS},
    tags=["budgets"],
    summary="Create or change a budget (operators of its tenant; admins for global ones)",
)
def budget_put(request: HttpRequest, body: s.BudgetIn) -> BudgetRow:
    tenants = _require_budget_write(request, body.scope, body.key)
    acted(
        request,
        action="budget.set",
        tenants=tenants,
        selection={
            "scope": body.scope,
            "key": body.key,
            "period": body.period,
            "limit": str(body.limit),
            "policy": body.policy,
        },
        run=lambda: engine_budgets.budget_upsert(
            scope=body.scope,
            key=body.key,
            period=body.period,
            limit=body.limit,
            policy=body.policy,
            actor=actor(request.user),
        ),
    )
    saved = Budget.objects.get(scope=body.scope, key=body.key, period=body.period)
    return budget_rows(budgets=[saved], now=timezone.now())[0]
