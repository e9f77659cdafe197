"""/api/schedules: list with next fire times, create, edit, run now, enable, disable and delete,
through the same services (and so the same checks, every wrong field named at once) as the
console and the CLI."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Schema, Status

from dashboard import access
from dashboard.api import schemas as s
from dashboard.api import trigger_schemas as ts
from dashboard.api.audit import acted
from dashboard.api.auth import actor, require_act
from dashboard.api.errors import ApiProblem
from ingest.triggers import selectors
from ingest.triggers.selectors import ScheduleRow
from ingest.triggers.services import (
    schedule_create_from,
    schedule_delete,
    schedule_run_now,
    schedule_set_enabled,
    schedule_update,
)
from ingest.triggers.services.schedules import EDITABLE

router = Router(tags=["schedules"])
E: dict[int, Any] = {400: s.ErrorOut, 401: s.ErrorOut, 403: s.ErrorOut, 404: s.ErrorOut, 422: s.ErrorOut}


class SchedulesDeletedOut(Schema):
    name: str
    deleted: bool


def _visible(request: HttpRequest, name: str) -> ScheduleRow:
    row = selectors.schedule_get(name=name, now=timezone.now())
    if row is None or not access.can_read(request.user, row.tenant):
        raise ApiProblem(404, "schedule_not_found", f"no schedule {name[:100]!r} is visible to this token")
    return row


@router.get("", response={200: list[ScheduleRow], **E})
def schedule_list(request: HttpRequest) -> list[ScheduleRow]:
    return selectors.schedule_list(now=timezone.now(), tenants=access.tenants_for(request.user))


@router.get("/{name}", response={200: ScheduleRow, **E}, summary="A schedule and its next 5 fires")
def schedule_get(request: HttpRequest, name: str) -> ScheduleRow:
    return _visible(request, name)


@router.post(
    "",
    response={201: ScheduleRow, **E, 409: s.ErrorOut},
    summary="Create a schedule (every wrong field named at once; nothing is created on a refusal)",
)
def schedule_create_view(request: HttpRequest, body: ts.ScheduleIn) -> Status[ScheduleRow]:
    f = body.model_dump()
    if isinstance(f["tenant"], str):
        require_act(request.user, f["tenant"])
    acted(
        request,
        action="schedule.create",
        tenants=[f["tenant"]] if isinstance(f["tenant"], str) else [],
        selection={"schedule": f["name"], **f},
        run=lambda: schedule_create_from(f, now=timezone.now()),
    )
    return Status(201, _visible(request, f["name"]))


@router.patch(
    "/{name}",
    response={200: ScheduleRow, **E},
    summary="Edit a schedule (every wrong field named at once; nothing changes on a refusal)",
)
def schedule_edit(request: HttpRequest, name: str, body: ts.ScheduleEditIn) -> ScheduleRow:
    tenant = _visible(request, name).tenant
    require_act(request.user, tenant)
    fields = body.model_dump(exclude_unset=True)
    if not fields:
        raise ApiProblem(400, "nothing_to_change", f"send at least one of {', '.join(EDITABLE)}")
    acted(
        request,
        action="schedule.update",
        tenants=[tenant],
        selection={"schedule": name, **fields},
        run=lambda: schedule_update(name=name, now=timezone.now(), **fields),
    )
    return _visible(request, name)


@router.delete(
    "/{name}",
    response={200: SchedulesDeletedOut, **E},
    summary="Delete a schedule: it fires no more; the instances it started stay",
)
def schedule_delete_view(request: HttpRequest, name: str) -> dict[str, Any]:
    row = _visible(request, name)
    require_act(request.user, row.tenant)
    acted(
        request,
        action="schedule.delete",
        tenants=[row.tenant],
        selection={"schedule": name, "workflow": row.workflow, "cron": row.cron},
        run=lambda: schedule_delete(name=name),
    )
    return {"name": name, "deleted": True}


@router.post("/{name}/run", response={201: s.RunNowOut, **E}, summary="Fire once now")
def schedule_run(request: HttpRequest, name: str) -> Status[dict[str, str]]:
    tenant = _visible(request, name).tenant
    require_act(request.user, tenant)
    instance_id = acted(
        request,
        action="schedule.run",
        tenants=[tenant],
        selection={"schedule": name},
        run=lambda: schedule_run_now(name=name, now=timezone.now(), actor=actor(request.user)),
    )
    return Status(201, {"instance_id": instance_id, "status_url": f"/api/instances/{instance_id}"})


def _set(request: HttpRequest, name: str, enabled: bool) -> ScheduleRow:
    tenant = _visible(request, name).tenant
    require_act(request.user, tenant)
    acted(
        request,
        action="schedule.enable" if enabled else "schedule.disable",
        tenants=[tenant],
        selection={"schedule": name},
        run=lambda: schedule_set_enabled(name=name, enabled=enabled, now=timezone.now()),
    )
    return _visible(request, name)


@router.post("/{name}/enable", response={200: ScheduleRow, **E})
def schedule_enable(request: HttpRequest, name: str) -> ScheduleRow:
    return _set(request, name, True)


@router.post("/{name}/disable", response={200: ScheduleRow, **E})
def schedule_disable(request: HttpRequest, name: str) -> ScheduleRow:
    return _set(request, name, False)
