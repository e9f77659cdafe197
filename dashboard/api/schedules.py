"""/api/schedules: list with next fire times, edit, run now, enable and disable."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Router, Schema

from dashboard import access
from dashboard.api import schemas as s
from dashboard.api.audit import acted
from dashboard.api.auth import actor, require_act
from dashboard.api.errors import ApiProblem
from ingest.triggers import selectors
from ingest.triggers.selectors import ScheduleRow
from ingest.triggers.services import schedule_run_now, schedule_set_enabled, schedule_update

router = Router(tags=["schedules"])
E: dict[int, Any] = {400: s.ErrorOut, 401: s.ErrorOut, 403: s.ErrorOut, 404: s.ErrorOut, 422: s.ErrorOut}


class ScheduleEditIn(Schema):
    """The fields to change; the others keep their value. A refusal changes none of them."""

    cron: str | None = Field(None, max_length=200)
    timezone: str | None = Field(None, max_length=64)
    missed_fire_policy: str | None = Field(None, max_length=20)
    catch_up_limit: int | None = Field(None, ge=1, le=100)
    params: dict[str, Any] | None = None


def _visible(request: HttpRequest, name: str) -> ScheduleRow:
    row = selectors.schedule_get(name=name, now=timezone.now())
    if row is None or not access.can_read(request.user, row.tenant):
        raise ApiProblem(404, "schedule_not_found", f"no schedule {name[:100]!r} is visible to "
                         "this token")
    return row


@router.get("", response={200: list[s.ScheduleOut], **E})
def schedule_list(request: HttpRequest) -> list[ScheduleRow]:
    return selectors.schedule_list(now=timezone.now(), tenants=access.tenants_for(request.user))


@router.get("/{name}", response={200: s.ScheduleOut, **E}, summary="A schedule and its next 5 fires")
def schedule_get(request: HttpRequest, name: str) -> ScheduleRow:
    return _visible(request, name)


@router.patch("/{name}", response={200: s.ScheduleOut, **E}, summary="Edit a schedule (validated; nothing changes on a refusal)")
def schedule_edit(request: HttpRequest, name: str, body: ScheduleEditIn) -> ScheduleRow:
    tenant = _visible(request, name).tenant
    require_act(request.user, tenant)
    fields = body.model_dump(exclude_none=True)
    if "cron" in fields:
        fields["cron_expression"] = fields.pop("cron")
    if not fields:
        raise ApiProblem(400, "nothing_to_change", "send at least one of cron, timezone, missed_fire_policy, "
                         "catch_up_limit, params")
    acted(request, action="schedule.update", tenants=[tenant], selection={"schedule": name, **body.model_dump(exclude_none=True)},
          run=lambda: schedule_update(name=name, now=timezone.now(), **fields))
    return _visible(request, name)


@router.post("/{name}/run", response={201: s.RunNowOut, **E}, summary="Fire once now")
def schedule_run(request: HttpRequest, name: str) -> tuple[int, dict[str, str]]:
    tenant = _visible(request, name).tenant
    require_act(request.user, tenant)
    instance_id = acted(request, action="schedule.run", tenants=[tenant], selection={"schedule": name},
                        run=lambda: schedule_run_now(name=name, now=timezone.now(), actor=actor(request.user)))
    return 201, {"instance_id": instance_id, "status_url": f"/api/instances/{instance_id}"}


def _set(request: HttpRequest, name: str, enabled: bool) -> ScheduleRow:
    tenant = _visible(request, name).tenant
    require_act(request.user, tenant)
    acted(request, action="schedule.enable" if enabled else "schedule.disable", tenants=[tenant],
          selection={"schedule": name},
          run=lambda: schedule_set_enabled(name=name, enabled=enabled, now=timezone.now()))
    return _visible(request, name)


@router.post("/{name}/enable", response={200: s.ScheduleOut, **E})
def schedule_enable(request: HttpRequest, name: str) -> ScheduleRow:
    return _set(request, name, True)


@router.post("/{name}/disable", response={200: s.ScheduleOut, **E})
def schedule_disable(request: HttpRequest, name: str) -> ScheduleRow:
    return _set(request, name, False)
