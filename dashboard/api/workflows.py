"""/api/workflows: the registered workflows with their instance counts in the caller's tenants."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from dashboard import access
from dashboard.api import schemas as s
from dashboard.api import selectors
from dashboard.api.errors import ApiProblem
from ingest.engine.workflow import get_workflow, workflow_names

router = Router(tags=["workflows"])


def _out(name: str, counts: dict[str, int]) -> dict[str, Any]:
    cls = get_workflow(name)
    return {"name": name, "is_async": cls.is_async(), "concurrency": cls.concurrency,
            "concurrency_key": cls.concurrency_key, "priority": cls.priority, "counts": counts}


@router.get("", response={200: list[s.WorkflowOut], 401: s.ErrorOut})
def workflow_list(request: HttpRequest) -> list[dict[str, Any]]:
    counts = selectors.workflow_counts(tenants=access.tenants_for(request.user))
    return [_out(name, counts.get(name, {})) for name in workflow_names()]


@router.get("/{name}", response={200: s.WorkflowOut, 401: s.ErrorOut, 404: s.ErrorOut})
def workflow_get(request: HttpRequest, name: str) -> dict[str, Any]:
    if name not in workflow_names():
        raise ApiProblem(404, "workflow_not_found", f"no workflow is registered as {name[:200]!r}; "
                         "GET /api/workflows lists them")
    counts = selectors.workflow_counts(tenants=access.tenants_for(request.user))
    return _out(name, counts.get(name, {}))
