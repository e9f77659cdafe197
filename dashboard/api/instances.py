"""/api/instances: start, list, get, control, history, events. Thin over the engine services."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Query, Router, Schema, Status

from dashboard import access
from dashboard.api import schemas as s
from dashboard.api import selectors
from dashboard.api.audit import acted
from dashboard.api.auth import actor, require_act
from dashboard.api.errors import ApiProblem
from ingest.alerts.callbacks import callback_register
from ingest.engine.models import Instance
from ingest.engine.models import Status as InstanceStatus
from ingest.engine.services import control as engine_control
from ingest.engine.services import forks as engine_forks
from ingest.engine.services import instances as engine_instances
from ingest.triggers.limits import reserved_params_check

R = TypeVar("R")
router = Router(tags=["instances"])
ERRORS: dict[int, Any] = {400: s.ErrorOut, 401: s.ErrorOut, 403: s.ErrorOut, 404: s.ErrorOut,
                          409: s.ErrorOut, 422: s.ErrorOut}


_STATUS = "(?:" + "|".join(InstanceStatus.values) + ")"
STATUS_PATTERN = rf"^\s*(?:{_STATUS}\s*)?(?:,\s*(?:{_STATUS}\s*)?)*$"
SORT_PATTERN = r"^(?:-?(?:created|started|updated|duration|cost|attr\.[a-z][a-z0-9_]{0,39}))?$"  # empty: the default
# One `key:value` search attribute (or nothing); the keys as dashboard/selectors/instances.py reads them.
ATTR_PATTERN = r"^\s*(?:[a-z][a-z0-9_]{0,39}:[^\s\x00]{1,200}\s*)?$"
CURSOR_PATTERN = r"^[A-Za-z0-9_-]{0,600}$"  # empty: the first page


class InstanceFilters(Schema):
    workflow: str | None = None
    # The patterns are declared, not enforced here: the list's own refusal (400) names the value.
    status: str | None = Field(None, json_schema_extra={"pattern": STATUS_PATTERN},
                               description="one or more statuses, comma-separated")
    tenant: str | None = None
    since: s.Moment | None = None
    until: s.Moment | None = None
    id_prefix: str | None = None
    cursor: str | None = Field(None, json_schema_extra={"pattern": CURSOR_PATTERN},
                               description="next_cursor of the previous page")
    limit: int = 50
    attr: list[Annotated[str, Field(json_schema_extra={"pattern": ATTR_PATTERN})]] = Field(
        default_factory=list, json_schema_extra={"maxItems": 5},
        description="search attributes, key:value (repeatable, at most 5)")
    sort: str | None = Field(None, json_schema_extra={"pattern": SORT_PATTERN}, description="created, started, updated, duration, cost or attr.<key>; "
                             "- for descending (default -created, keyset pages)")
    page: int = 1


def _visible(request: HttpRequest, instance_id: str) -> Instance:
    instance = selectors.instance_visible(tenants=access.tenants_for(request.user),
                                          instance_id=instance_id)
    if instance is None:
        raise ApiProblem(404, "instance_not_found", f"no instance {instance_id[:100]!r} is visible "
                         "to this token; check the id and the token's tenants")
    return instance


def _acted(request: HttpRequest, instance_id: str) -> Instance:
    instance = _visible(request, instance_id)
    require_act(request.user, instance.tenant)
    return instance


def _audited(request: HttpRequest, instance: Instance, action: str, reason: str, run: Callable[[], R],
             **selection: Any) -> R:
    return acted(request, action=f"instance.{action}", tenants=[instance.tenant], reason=reason,
                 selection={"instance_id": instance.id, **selection}, run=run)


def _ok(instance_id: str) -> dict[str, Any]:
    status = Instance.objects.filter(pk=instance_id).values_list("status", flat=True).first()
    return {"ok": True, "instance_id": instance_id, "status": status or ""}


@router.post("", response={201: s.InstanceOut, **ERRORS}, summary="Start an instance")
def instance_start(request: HttpRequest, body: s.InstanceIn) -> Status[dict[str, Any]]:
    require_act(request.user, body.tenant)
    reserved_params_check(body.params)
    def start() -> Any:
        # One transaction with the audit entry: a refused callback URL starts nothing.
        created = engine_instances.instance_create(
            workflow=body.workflow, id=body.id, params=body.params, tenant=body.tenant,
            priority=body.priority, start_at=selectors.as_utc(body.start_at, what="start_at"),
            actor=actor(request.user))
        if body.callback_url is not None:
            callback_register(instance_id=created.id, tenant=body.tenant, url=body.callback_url,
                              source="api", now=timezone.now())
        return created

    created = acted(request, action="instance.start", tenants=[body.tenant],
                    selection={"workflow": body.workflow, "instance_id": body.id}, run=start)
    return Status(201, selectors.instance_dict(Instance.objects.get(pk=created.id)))


@router.get("", response={200: s.InstancePage, **ERRORS}, summary="List instances, newest first")
def instance_list(request: HttpRequest, filters: Query[InstanceFilters]) -> dict[str, Any]:
    return selectors.instance_page(tenants=access.tenants_for(request.user), **filters.dict())


@router.get("/{instance_id}", response={200: s.InstanceDetail, **ERRORS},
            summary="An instance with its steps and attempts")
def instance_get(request: HttpRequest, instance_id: str) -> dict[str, Any]:
    return selectors.instance_detail(_visible(request, instance_id))


@router.get("/{instance_id}/history", response={200: s.HistoryPage, **ERRORS})
def instance_history(request: HttpRequest, instance_id: str, after: int | None = None,
                     limit: int = 100) -> dict[str, Any]:
    return selectors.history_page(instance=_visible(request, instance_id), after=after, limit=limit)


@router.post("/{instance_id}/pause", response={200: s.OkOut, **ERRORS})
def instance_pause(request: HttpRequest, instance_id: str, body: s.ReasonIn) -> dict[str, Any]:
    _audited(request, _acted(request, instance_id), "pause", body.reason, lambda: engine_control.instance_pause(
        instance_id=instance_id, actor=actor(request.user), reason=body.reason))
    return _ok(instance_id)


@router.post("/{instance_id}/resume", response={200: s.OkOut, **ERRORS})
def instance_resume(request: HttpRequest, instance_id: str, body: s.ReasonIn) -> dict[str, Any]:
    _audited(request, _acted(request, instance_id), "resume", body.reason, lambda: engine_control.instance_resume(
        instance_id=instance_id, actor=actor(request.user), reason=body.reason))
    return _ok(instance_id)


@router.post("/{instance_id}/terminate", response={200: s.OkOut, **ERRORS})
def instance_terminate(request: HttpRequest, instance_id: str, body: s.TerminateIn
                       ) -> dict[str, Any]:
    _audited(request, _acted(request, instance_id), "terminate", body.reason, lambda: engine_control.instance_terminate(
        instance_id=instance_id, rollback=body.rollback, actor=actor(request.user), reason=body.reason),
        rollback=body.rollback)
    return _ok(instance_id)


@router.post("/{instance_id}/restart", response={200: s.OkOut, **ERRORS})
def instance_restart(request: HttpRequest, instance_id: str, body: s.RestartIn) -> dict[str, Any]:
    _audited(request, _acted(request, instance_id), "restart", body.reason, lambda: engine_control.instance_restart(
        instance_id=instance_id, from_step=body.from_step, actor=actor(request.user), reason=body.reason),
        from_step=body.from_step)
    return _ok(instance_id)


@router.post("/{instance_id}/retry", response={200: s.OkOut, **ERRORS},
             summary="Retry an errored instance from its failed step")
def instance_retry(request: HttpRequest, instance_id: str, body: s.ReasonIn) -> dict[str, Any]:
    _audited(request, _acted(request, instance_id), "retry", body.reason, lambda: engine_control.instance_retry(
        instance_id=instance_id, actor=actor(request.user), reason=body.reason))
    return _ok(instance_id)


@router.post("/{instance_id}/replay", response={201: s.InstanceOut, **ERRORS},
             summary="Replay as a new linked instance, with the same or edited params")
def instance_replay(request: HttpRequest, instance_id: str, body: s.ReplayIn
                    ) -> Status[dict[str, Any]]:
    original = _acted(request, instance_id)
    reserved_params_check(body.params, original=original.params)
    new = _audited(request, original, "replay", body.reason, lambda: engine_control.instance_replay(
        instance_id=instance_id, params=body.params, actor=actor(request.user), reason=body.reason),
        edited=body.params is not None)
    return Status(201, selectors.instance_dict(Instance.objects.get(pk=new.id)))


@router.post("/{instance_id}/fork", response={201: s.InstanceOut, **ERRORS},
             summary="Fork: a new instance from a step of this one, the results before it copied")
def instance_fork(request: HttpRequest, instance_id: str, body: s.ForkIn) -> Status[dict[str, Any]]:
    original = _acted(request, instance_id)
    reserved_params_check(body.params, original=original.params)
    new = _audited(request, original, "fork", body.reason, lambda: engine_forks.instance_fork(
        instance_id=instance_id, from_step=body.from_step, params=body.params, new_id=body.id,
        actor=actor(request.user), reason=body.reason),
        from_step=body.from_step, edited=body.params is not None)
    return Status(201, selectors.instance_dict(Instance.objects.get(pk=new.id)))


@router.post("/{instance_id}/events", response={202: s.OkOut, **ERRORS},
             summary="Send an event to an instance (buffered until it waits for that type)")
def instance_send_event(request: HttpRequest, instance_id: str, body: s.EventIn
                        ) -> Status[dict[str, Any]]:
    _audited(request, _acted(request, instance_id), "event", "", lambda: engine_instances.instance_send_event(
        instance_id=instance_id, type=body.type, payload=body.payload, actor=actor(request.user)),
        type=body.type)
    return Status(202, _ok(instance_id))
