"""/api/workflows: the registered workflows with their instance counts in the caller's tenants."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from dashboard import access
from dashboard.api import schemas as s
from dashboard.api import selectors
from dashboard.api.audit import acted
from dashboard.api.auth import actor
from dashboard.api.errors import ApiProblem
from dashboard.versions import retire_refusal
from ingest.engine import get_workflow, workflow_names, workflow_versions
from ingest.engine.services.versions import workflow_version_retire

router = Router(tags=["workflows"])
MAX_VERSION = 2**31 - 1  # the column's range: a larger number is no version of anything


def _out(name: str, counts: dict[str, int]) -> dict[str, Any]:
    cls = get_workflow(name)
    return {
        "name": name,
        "is_async": cls.is_async(),
        "concurrency": cls.concurrency,
        "concurrency_key": cls.concurrency_key,
        "priority": cls.priority,
        "counts": counts,
        "version": cls.version,
    }


@router.get("", response={200: list[s.WorkflowOut], 401: s.ErrorOut})
def workflow_list(request: HttpRequest) -> list[dict[str, Any]]:
    counts = selectors.workflow_counts(tenants=access.tenants_for(request.user))
    return [_out(name, counts.get(name, {})) for name in workflow_names()]


def _known(name: str) -> None:
    if name not in workflow_names():
        raise ApiProblem(
            404, "workflow_not_found", f"no workflow is registered as {name[:200]!r}; GET /api/workflows lists them"
        )


@router.get("/{name}", response={200: s.WorkflowOut, 401: s.ErrorOut, 404: s.ErrorOut})
def workflow_get(request: HttpRequest, name: str) -> dict[str, Any]:
    _known(name)
    counts = selectors.workflow_counts(tenants=access.tenants_for(request.user))
    return _out(name, counts.get(name, {}))


@router.get(
    "/{name}/versions",
    response={200: list[s.VersionOut], 401: s.ErrorOut, 404: s.ErrorOut},
    summary="The workflow's versions, newest first, with their instance counts in the caller's tenants",
)
def version_list(request: HttpRequest, name: str) -> list[dict[str, Any]]:
    _known(name)
    return workflow_versions(workflow=name, tenants=access.tenants_for(request.user))


@router.post(
    "/{name}/versions/{version}/retire",
    response={200: s.VersionOut, **s.ERRORS},
    summary="Retire an old version once no instance runs on it (409 while some do)",
)
def version_retire(request: HttpRequest, name: str, version: int, body: s.ReasonIn) -> dict[str, Any]:
    _known(name)
    if not 1 <= version <= MAX_VERSION:
        raise ApiProblem(
            422, "invalid_version", f"a workflow version is a whole number from 1 to {MAX_VERSION}; got {version}"
        )
    refusal = retire_refusal(request.user, workflow=name, version=version)
    if refusal is not None:
        raise ApiProblem(403, "forbidden", refusal)
    acted(
        request,
        action="workflow.version_retire",
        tenants=access.acting_tenants(request.user),
        reason=body.reason,
        selection={"workflow": name, "version": version},
        run=lambda: workflow_version_retire(
            workflow=name, version=version, actor=actor(request.user), reason=body.reason
        ),
    )
    rows = workflow_versions(workflow=name, tenants=access.tenants_for(request.user))
    return next(r for r in rows if r["version"] == version)
