"""/api/instances: start, list, get, control, history, events. Every action goes through
`dashboard.actions`, the service the console and the command line use too."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status

from dashboard import access, actions, staleness
from dashboard.api import schemas as s
from dashboard.api import selectors
from dashboard.api.errors import ApiProblem
from dashboard.api.openapi import SPACES_CLASS, SPACES_RUN
from dashboard.audit import Origin
from dashboard.models import AuditSource
from dashboard.selectors.step_logs import step_logs
from ingest.engine.models import Instance
from ingest.engine.models import Status as InstanceStatus

router = Router(tags=["instances"])


_STATUS = "(?:" + "|".join(InstanceStatus.values) + ")"
STATUS_PATTERN = rf"^{SPACES_RUN}(?:{_STATUS}{SPACES_RUN})?(?:,{SPACES_RUN}(?:{_STATUS}{SPACES_RUN})?)*$"
SORT_PATTERN = r"^(?:-?(?:created|started|updated|duration|cost|attr\.[a-z][a-z0-9_]{0,39}))?$"  # empty: the default
# One search-attribute term (or nothing) of dashboard/attr_query.py's grammar: key:value,
# key:a|b, key>=N (> <= <), key:N..M, each optionally negated with a leading !. Spaces are
# str.split()'s (SPACES), not a dialect's `\s`: the list splits a field on them.
_VALUE = f"[^\\x00|{SPACES_CLASS}]{{1,200}}"
_TERM = (
    r"!?[a-z][a-z0-9_]{0,39}(?:(?:>=|<=|>|<)-?[0-9]{1,15}(?:\.[0-9]{1,15})?"
    f"|:{_VALUE}(?:\\|{_VALUE}){{0,9}})"
)
ATTR_PATTERN = f"^[{SPACES_CLASS}]*(?:{_TERM}[{SPACES_CLASS}]*)?$"
CURSOR_PATTERN = r"^[A-Za-z0-9_-]{0,600}$"  # empty: the first page


class InstanceFilters(Schema):
    """The console's list filters (dashboard/selectors/instance_filters.py), as query parameters."""

    workflow: str | None = Field(
        None,
        description="a registered workflow's name matches exactly; "
        "other text matches part of a name (as the console's filter)",
    )
    # The patterns are declared, not enforced here: the list's own refusal (400) names the value.
    status: str | None = Field(
        None, json_schema_extra={"pattern": STATUS_PATTERN}, description="one or more statuses, comma-separated"
    )
    tenant: str | None = None
    since: s.Moment | None = None
    until: s.Moment | None = None
    id_prefix: str | None = None
    cursor: str | None = Field(
        None, json_schema_extra={"pattern": CURSOR_PATTERN}, description="next_cursor of the previous page"
    )
    limit: int = 50
    attr: list[Annotated[str, Field(json_schema_extra={"pattern": ATTR_PATTERN})]] = Field(
        default_factory=list,
        json_schema_extra={"maxItems": 5},
        description="search attribute terms, all of which must hold (repeatable, at most 5): key:value, "
        "key:a|b (any of), key>=N, key>N, key<=N, key<N, key:N..M (numbers, either end may "
        "be left out), !term (negated: the attribute is absent or the term does not hold); "
        "e.g. customer:acme|globex, amount>=100, !region:eu. A term that does not parse is a "
        "400 naming it",
    )
    top_level: bool = Field(
        False,
        description="only instances that are no fan-out item or child run "
        "(no parent); the console's list does this by default",
    )
    parent: str | None = Field(None, description="only the fan-out items and child runs of this instance")
    sort: str | None = Field(
        None,
        json_schema_extra={"pattern": SORT_PATTERN},
        description="created, started, updated, duration, cost or attr.<key>; "
        "- for descending (default -created, keyset pages)",
    )
    page: int = 1


def _visible(request: HttpRequest, instance_id: str) -> Instance:
    instance = selectors.instance_visible(tenants=access.tenants_for(request.user), instance_id=instance_id)
    if instance is None:
        raise ApiProblem(
            404,
            "instance_not_found",
            f"no instance {instance_id[:100]!r} is visible to this token; check the id and the token's tenants",
        )
    return instance


def _act(
    request: HttpRequest, instance_id: str, action: str, body: s.ReasonIn | s.EventIn, **arguments: Any
) -> actions.Done:
    """The action through the one service; its refusal is this API's error envelope."""
    try:
        return actions.instance_act(
            user=request.user,
            origin=Origin.of_request(request, source=AuditSource.API),
            instance_id=instance_id,
            action=action,
            reason=getattr(body, "reason", ""),
            arguments=arguments,
            expected_version=body.expected_version,
        )
    except actions.ActionRefused as exc:
        raise ApiProblem(exc.status, exc.code, exc.message) from None


def _ok(instance_id: str) -> dict[str, Any]:
    status = Instance.objects.filter(pk=instance_id).values_list("status", flat=True).first()
    return {
        "ok": True,
        "instance_id": instance_id,
        "status": status or "",
        "version": staleness.instance_version(instance_id=instance_id),
    }


START_EXAMPLE = {
    "workflow": "gong-ingest",
    "tenant": "acme",
    "params": {"call_id": "7712", "account": "acme"},
    "id": "gong-acme-7712",
    "priority": 10,
    "start_at": "2026-12-01T09:00:00Z",
    "search_attributes": {"customer": "acme", "backfill": True},
}


@router.post(
    "",
    response={201: s.InstanceOut, **s.ERRORS},
    summary="Start an instance",
    description="Start a run of a registered workflow in one of the token's tenants (operator "
    "role). `id` is optional (a new one is made); a duplicate id answers 409. "
    "`start_at` delays the first turn; higher `priority` runs first; "
    "`search_attributes` tag the run for the list's `attr` query from its start.",
    openapi_extra={
        "requestBody": {
            "content": {
                "application/json": {
                    "examples": {
                        "start": {"summary": "Start gong-ingest for one call", "value": START_EXAMPLE},
                        "minimal": {
                            "summary": "Only the workflow and its params",
                            "value": {
                                "workflow": "url-classify",
                                "tenant": "acme",
                                "params": {"url": "https://example.com/pricing"},
                            },
                        },
                    }
                }
            }
        }
    },
)
def instance_start(request: HttpRequest, body: s.InstanceIn) -> Status[dict[str, Any]]:
    try:
        done = actions.instance_start(
            user=request.user,
            origin=Origin.of_request(request, source=AuditSource.API),
            workflow=body.workflow,
            id=body.id,
            params=body.params,
            tenant=body.tenant,
            priority=body.priority,
            start_at=selectors.as_utc(body.start_at, what="start_at"),
            callback_url=body.callback_url,
            search_attributes=body.search_attributes,
        )
    except actions.ActionRefused as exc:
        raise ApiProblem(exc.status, exc.code, exc.message) from None
    return Status(201, selectors.instance_dict(Instance.objects.get(pk=done.instance_id)))


@router.get("", response={200: s.InstancePage, **s.ERRORS}, summary="List instances, newest first")
def instance_list(request: HttpRequest, filters: Query[InstanceFilters]) -> dict[str, Any]:
    return selectors.instance_page(user=request.user, **filters.dict())


@router.get(
    "/{instance_id}", response={200: s.InstanceDetail, **s.ERRORS}, summary="An instance with its steps and attempts"
)
def instance_get(request: HttpRequest, instance_id: str) -> dict[str, Any]:
    return selectors.instance_detail(_visible(request, instance_id))


@router.get("/{instance_id}/history", response={200: s.HistoryPage, **s.ERRORS})
def instance_history(
    request: HttpRequest, instance_id: str, after: int | None = None, limit: int = 100
) -> dict[str, Any]:
    return selectors.history_page(instance=_visible(request, instance_id), after=after, limit=limit)


@router.get(
    "/{instance_id}/logs",
    response={200: s.InstanceLogsOut, **s.ERRORS},
    summary="What the instance's steps logged, per attempt",
    description="The lines each attempt's code logged through Python's logging, as the engine keeps "
    "them: per attempt, its last lines within the bounds (`dropped` counts the earlier ones), "
    "secrets redacted; a running attempt's lines so far. `step` (a step's name, and `seq` for "
    "its Nth call) answers that step whether it logged or not; without it, every step that "
    "logged. A sensitive step's lines are not kept.",
)
def instance_logs(
    request: HttpRequest,
    instance_id: str,
    step: str | None = None,
    seq: int | None = None,
    after: int | None = None,
    limit: int = 100,
) -> dict[str, Any]:
    instance = _visible(request, instance_id)
    steps, next_after = step_logs(instance=instance, name=step, seq=seq, after=after, limit=limit)
    if step is not None and not steps and after is None:
        which = f"call {seq} of step {step[:100]!r}" if seq is not None else f"step {step[:100]!r}"
        raise ApiProblem(
            404,
            "step_not_found",
            f"instance {instance.id} has no {which} that runs code "
            f"(step.do); GET /api/instances/{instance.id} lists its steps",
        )
    return {"instance_id": instance.id, "status": instance.status, "steps": steps, "next_after": next_after}


@router.post("/{instance_id}/pause", response={200: s.OkOut, **s.ERRORS})
def instance_pause(request: HttpRequest, instance_id: str, body: s.ReasonIn) -> dict[str, Any]:
    _act(request, instance_id, "pause", body)
    return _ok(instance_id)


@router.post("/{instance_id}/resume", response={200: s.OkOut, **s.ERRORS})
def instance_resume(request: HttpRequest, instance_id: str, body: s.ReasonIn) -> dict[str, Any]:
    _act(request, instance_id, "resume", body)
    return _ok(instance_id)


@router.post("/{instance_id}/terminate", response={200: s.OkOut, **s.ERRORS})
def instance_terminate(request: HttpRequest, instance_id: str, body: s.TerminateIn) -> dict[str, Any]:
    _act(request, instance_id, "terminate", body, rollback=body.rollback)
    return _ok(instance_id)


@router.post("/{instance_id}/restart", response={200: s.OkOut, **s.ERRORS})
def instance_restart(request: HttpRequest, instance_id: str, body: s.RestartIn) -> dict[str, Any]:
    _act(request, instance_id, "restart", body, from_step=body.from_step)
    return _ok(instance_id)


@router.post(
    "/{instance_id}/retry",
    response={200: s.OkOut, **s.ERRORS},
    summary="Retry an errored instance from its failed step",
    description="Completed steps keep their results. An instance whose `non_retryable` is true "
    "(its step raised NonRetryableError) fails the same way: replay it with edited "
    "params instead. Every action takes `expected_version` (409 `stale` when the "
    "instance moved since that read).",
)
def instance_retry(request: HttpRequest, instance_id: str, body: s.ReasonIn) -> dict[str, Any]:
    _act(request, instance_id, "retry", body)
    return _ok(instance_id)


@router.post(
    "/{instance_id}/replay",
    response={201: s.InstanceOut, **s.ERRORS},
    summary="Replay as a new linked instance, with the same or edited params",
)
def instance_replay(request: HttpRequest, instance_id: str, body: s.ReplayIn) -> Status[dict[str, Any]]:
    done = _act(request, instance_id, "replay", body, params=body.params)
    return Status(201, selectors.instance_dict(Instance.objects.get(pk=done.target)))


@router.post(
    "/{instance_id}/fork",
    response={201: s.InstanceOut, **s.ERRORS},
    summary="Fork: a new instance from a step of this one, the results before it copied",
)
def instance_fork(request: HttpRequest, instance_id: str, body: s.ForkIn) -> Status[dict[str, Any]]:
    done = _act(request, instance_id, "fork", body, from_step=body.from_step, params=body.params, new_id=body.id)
    return Status(201, selectors.instance_dict(Instance.objects.get(pk=done.target)))


@router.post(
    "/{instance_id}/events",
    response={202: s.OkOut, **s.ERRORS},
    summary="Send an event to an instance (buffered until it waits for that type)",
)
def instance_send_event(request: HttpRequest, instance_id: str, body: s.EventIn) -> Status[dict[str, Any]]:
    _act(request, instance_id, "event", body, type=body.type, payload=body.payload)
    return Status(202, _ok(instance_id))
