"""/api/limits: the concurrency limits per workflow and tenant with what runs now; an operator of
a tenant sets or removes its limits (audited; `version` refuses a change made since a read)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Query, Router, Schema

from dashboard import access
from dashboard.api import schemas as s
from dashboard.api.audit import acted
from dashboard.api.auth import actor, require_act
from dashboard.api.openapi import TRIMMED_PATTERN
from dashboard.selectors.limits import LimitRow, limit_row, limit_rows
from ingest.engine.services import limits as engine_limits

router = Router(tags=["limits"])
VERSION = r"^[0-9]{1,20}$"


def _keyed_workflow(schema: dict[str, Any]) -> None:
    # Read when the document is made: the registered workflows with a concurrency key.
    schema.update(type="string", enum=[cls.name for cls in engine_limits.keyed_workflows()])


class LimitIn(s.InputSchema):
    """The service names every wrong field (422 with `fields`); the schema states the same rules."""

    workflow: str = Field(
        ..., json_schema_extra=_keyed_workflow, description="A workflow whose concurrency key is the tenant"
    )
    tenant: str = Field(
        ..., json_schema_extra={"minLength": 1, "maxLength": engine_limits.MAX_KEY, "pattern": TRIMMED_PATTERN}
    )
    max_concurrent: int = Field(
        ...,
        json_schema_extra={"minimum": 1, "maximum": engine_limits.MAX_CONCURRENT},
        description="At most this many of the tenant's instances run at once (to stop a tenant's runs, pause them)",
    )
    version: str | None = Field(
        None,
        pattern=VERSION,
        description="The version a read answered ('0': none "
        "was set); the change is refused (409) when the limit moved since",
    )


class LimitQuery(Schema):
    workflow: str = ""


class LimitRemoveQuery(Schema):
    version: str | None = Field(
        None,
        pattern=VERSION,
        description="The version a read answered; the removal is refused (409) when the limit moved since",
    )


class RemovedOut(Schema):
    removed: int


@router.get(
    "/limits",
    response={200: list[LimitRow], **s.ERRORS},
    summary="Concurrency limits per workflow and tenant, "
    "with how many instances run and wait now (the caller's tenants)",
)
def limit_list(request: HttpRequest, query: Query[LimitQuery]) -> list[LimitRow]:
    return limit_rows(tenants=access.tenants_for(request.user), now=timezone.now(), workflow=query.workflow)


@router.put(
    "/limits",
    response={200: LimitRow, **s.ERRORS},
    summary="Set a tenant's concurrency limit on a workflow "
    "(operators of the tenant); the next claim of every worker honours it",
)
def limit_put(request: HttpRequest, body: LimitIn) -> LimitRow:
    require_act(request.user, body.tenant)
    acted(
        request,
        action="limit.set",
        tenants=[body.tenant],
        selection={"workflow": body.workflow, "tenant": body.tenant, "max_concurrent": body.max_concurrent},
        run=lambda: engine_limits.concurrency_limit_set(
            workflow=body.workflow,
            key=body.tenant,
            max_concurrent=body.max_concurrent,
            actor=actor(request.user),
            version=body.version,
        ),
    )
    row = limit_row(workflow=body.workflow, tenant=body.tenant, now=timezone.now())
    assert row is not None  # it was just set
    return row


@router.delete(
    "/limits/{workflow}/{tenant}",
    response={200: RemovedOut, **s.ERRORS},
    summary="Remove a tenant's concurrency limit: the workflow's own cap applies again",
)
def limit_delete(request: HttpRequest, workflow: str, tenant: str, query: Query[LimitRemoveQuery]) -> dict[str, int]:
    require_act(request.user, tenant)
    version = query.version
    removed = acted(
        request,
        action="limit.remove",
        tenants=[tenant],
        selection={"workflow": workflow, "tenant": tenant},
        run=lambda: engine_limits.concurrency_limit_delete(
            workflow=workflow, key=tenant, actor=actor(request.user), version=version
        ),
    )
    return {"removed": removed}
