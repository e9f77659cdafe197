"""/api/schedules: list with next fire times, edit, run now, enable and disable."""

from __future__ import annotations

from typing import Any, cast
from zoneinfo import available_timezones

from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Router, Status
from pydantic import ConfigDict, JsonValue

from dashboard import access
from dashboard.api import schemas as s
from dashboard.api.audit import acted
from dashboard.api.auth import actor, require_act
from dashboard.api.errors import ApiProblem
from ingest.triggers import selectors
from ingest.triggers.models import MissedFirePolicy
from ingest.triggers.selectors import ScheduleRow
from ingest.triggers.services import schedule_run_now, schedule_set_enabled, schedule_update

router = Router(tags=["schedules"])
TIMEZONES = cast("list[JsonValue]", sorted(available_timezones()))  # IANA names ZoneInfo reads
# Five cron fields within their ranges (minute hour day-of-month month day-of-week), each `*`, a
# number or a range, with an optional step, comma-separated; or a macro such as @daily. What
# croniter accepts beyond it (names such as MON) is left out of the schema; Quartz's L, W and #
# are in (cron.plan reads them).
_N = {"min": r"[0-5]?[0-9]", "hour": r"(?:[01]?[0-9]|2[0-3])", "dom": r"(?:0?[1-9]|[12][0-9]|3[01])",
      "mon": r"(?:0?[1-9]|1[0-2])", "dow": r"[0-7]"}
_QUARTZ = {"dom": r"(?:LW|L(?:-[0-9]{1,2})?|(?:0?[1-9]|[12][0-9]|3[01])W)", "dow": r"[0-7](?:L|#[1-5])"}
_LIST = {k: rf"(?:\*|{n}(?:-{n})?)(?:/[1-9][0-9]?)?(?:,(?:\*|{n}(?:-{n})?)(?:/[1-9][0-9]?)?)*" for k, n in _N.items()}
_FIELD = {k: rf"(?:{_QUARTZ[k]}|{v})" if k in _QUARTZ else v for k, v in _LIST.items()}
CRON_PATTERN = (r"^(?:@(?:yearly|annually|monthly|weekly|daily|midnight|hourly)|"
                + " ".join(_FIELD[k] for k in ("min", "hour", "dom", "mon", "dow")) + ")$")
E: dict[int, Any] = {400: s.ErrorOut, 401: s.ErrorOut, 403: s.ErrorOut, 404: s.ErrorOut, 422: s.ErrorOut}


class ScheduleEditIn(s.InputSchema):
    """The fields to change; the others keep their value. A refusal changes none of them."""

    # Required: at least one field, not null (a body of nulls changes nothing: 400).
    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"required": [name], "properties": {name: {"not": {"type": "null"}}}}
        for name in ("cron", "timezone", "missed_fire_policy", "catch_up_limit", "params")]})
    # Declared for clients, not enforced here: the service's refusal names what is wrong.
    cron: str | None = Field(None, max_length=200, json_schema_extra={"pattern": CRON_PATTERN})
    timezone: str | None = Field(None, max_length=64, json_schema_extra={
        "anyOf": [{"type": "string", "enum": TIMEZONES}, {"type": "null"}]})
    missed_fire_policy: str | None = Field(None, max_length=20, json_schema_extra={
        "anyOf": [{"type": "string", "enum": list(MissedFirePolicy.values)}, {"type": "null"}]})
    catch_up_limit: int | None = Field(None, ge=1, le=100)
    params: dict[str, Any] | None = None


def _visible(request: HttpRequest, name: str) -> ScheduleRow:
    row = selectors.schedule_get(name=name, now=timezone.now())
    if row is None or not access.can_read(request.user, row.tenant):
        raise ApiProblem(404, "schedule_not_found", f"no schedule {name[:100]!r} is visible to "
                         "this token")
    return row


@router.get("", response={200: list[ScheduleRow], **E})
def schedule_list(request: HttpRequest) -> list[ScheduleRow]:
    return selectors.schedule_list(now=timezone.now(), tenants=access.tenants_for(request.user))


@router.get("/{name}", response={200: ScheduleRow, **E}, summary="A schedule and its next 5 fires")
def schedule_get(request: HttpRequest, name: str) -> ScheduleRow:
    return _visible(request, name)


@router.patch("/{name}", response={200: ScheduleRow, **E}, summary="Edit a schedule (validated; nothing changes on a refusal)")
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
def schedule_run(request: HttpRequest, name: str) -> Status[dict[str, str]]:
    tenant = _visible(request, name).tenant
    require_act(request.user, tenant)
    instance_id = acted(request, action="schedule.run", tenants=[tenant], selection={"schedule": name},
                        run=lambda: schedule_run_now(name=name, now=timezone.now(), actor=actor(request.user)))
    return Status(201, {"instance_id": instance_id, "status_url": f"/api/instances/{instance_id}"})


def _set(request: HttpRequest, name: str, enabled: bool) -> ScheduleRow:
    tenant = _visible(request, name).tenant
    require_act(request.user, tenant)
    acted(request, action="schedule.enable" if enabled else "schedule.disable", tenants=[tenant],
          selection={"schedule": name},
          run=lambda: schedule_set_enabled(name=name, enabled=enabled, now=timezone.now()))
    return _visible(request, name)


@router.post("/{name}/enable", response={200: ScheduleRow, **E})
def schedule_enable(request: HttpRequest, name: str) -> ScheduleRow:
    return _set(request, name, True)


@router.post("/{name}/disable", response={200: ScheduleRow, **E})
def schedule_disable(request: HttpRequest, name: str) -> ScheduleRow:
    return _set(request, name, False)
