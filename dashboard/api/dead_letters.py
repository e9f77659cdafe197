"""/api/dead-letters: list, preview a redrive, redrive.

A redrive names its selection explicitly: `ids` (each must be visible, else 404), or a `filter`
previewed first — the preview's token is required to act on "all that match", and the redrive
acts only when the set it recomputes is the one the preview counted (else 409, nothing done).
An empty id list, or neither ids nor filter, is a 400: no selection never means everything.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema
from pydantic import ConfigDict
from pydantic.config import JsonDict

from dashboard import access, selection
from dashboard.actions import ActionRefused
from dashboard.api import schemas as s
from dashboard.api import selectors
from dashboard.api.auth import require_act
from dashboard.api.errors import ApiProblem
from dashboard.api.openapi import NONBLANK_PATTERN, SPACES_RUN
from dashboard.audit import Origin
from dashboard.dead_letter_actions import LetterAction, dead_letter_act, dead_letters_redrive
from dashboard.models import AuditSource
from dashboard.selectors.dead_letters import (
    DeadLetterFilters,
    DeadLetterItem,
    dead_letter_items,
    redrive_failed_for_good,
)
from dashboard.staleness import VERSION_PATTERN
from ingest.engine.models import DeadLetter
from ingest.engine.services import dead_letters as engine_dead_letters
from ingest.engine.services.dead_letters import DeadLetterFilter

router = Router(tags=["dead letters"])
_ACTION = "dead_letters.redrive"


class DeadLetterQuery(Schema):
    # An unknown state is a 422 naming it, never read as "open"; "" lists every state.
    state: Literal["open", "redriven", "discarded", ""] | None = "open"
    workflow: str | None = None
    tenant: str | None = None
    signature: str | None = None
    limit: int = 50


@router.get("", response={200: list[DeadLetterItem], **s.ERRORS})
def dead_letter_list(request: HttpRequest, filters: Query[DeadLetterQuery]) -> list[DeadLetterItem]:
    chosen = DeadLetterFilters(
        state=filters.state or "",
        workflow=filters.workflow or "",
        tenant=filters.tenant or "",
        signature=filters.signature or "",
    )
    return dead_letter_items(
        tenants=access.tenants_for(request.user), filters=chosen, limit=max(1, min(filters.limit, selectors.MAX_LIMIT))
    )


_IDS: JsonDict = {"required": ["ids"], "properties": {"ids": {"type": "array"}}}
_FILTER: JsonDict = {"required": ["filter"], "properties": {"filter": {"type": "object"}}}
_TOKEN: JsonDict = {"required": ["token"], "properties": {"token": {"type": "string", "minLength": 1}}}
_IDS_ALONE: JsonDict = {"required": ["ids"], "properties": {"ids": {"type": "array"}, "filter": {"type": "null"}}}


class SelectionIn(s.InputSchema):
    # Required together: `ids` or a `filter` (neither is a 400: no selection never means all).
    model_config = ConfigDict(json_schema_extra={"anyOf": [_IDS, _FILTER]})
    # Strings are let through the schema so that an id that does not parse ("abc") is this
    # endpoint's 400 naming it, as in the dashboard, not a generic validation error.
    # Row ids are 64-bit: a larger integer is a 422 here, not an overflow in the database driver.
    # Ids of at most 18 digits, as selection.ids_parse reads them.
    ids: (
        list[
            Annotated[int, Field(ge=1, le=10**18 - 1)]
            | Annotated[str, Field(json_schema_extra={"pattern": rf"^{SPACES_RUN}[1-9][0-9]{{0,17}}{SPACES_RUN}$"})]
        ]
        | None
    ) = Field(None, max_length=1000, json_schema_extra={"minItems": 1})
    filter: s.RedriveFilter | None = None


class PreviewOut(Schema):
    count: int
    ids: list[int]
    token: str
    non_retryable_ids: list[int] = Field(
        ...,
        description="Of `ids`, the letters whose step failed for good "
        "(NonRetryableError): a redrive fails them the same way; replay "
        "them with edited params instead",
    )


def _scope(request: HttpRequest, body: SelectionIn) -> tuple[DeadLetterFilter | None, list[int]]:
    """The engine filter (None for an id selection) and the open ids it selects, in the caller's
    acting tenants. Raises 400 for an empty selection, 404 for ids or a tenant not visible."""
    if body.ids is None and body.filter is None:
        raise ApiProblem(
            400,
            "empty_selection",
            "name the dead letters to redrive: `ids` (a "
            "non-empty list) or a `filter` (`{}` for every open one in your tenants), "
            "previewed first; nothing was done",
        )
    if body.ids is not None:
        try:
            ids = selection.ids_parse(str(i) for i in body.ids)
        except selection.SelectionError as exc:
            raise ApiProblem(400, "invalid_selection", str(exc)) from None
        visible = set(
            DeadLetter.objects.filter(id__in=ids, tenant__in=access.tenants_for(request.user)).values_list(
                "tenant", "id"
            )
        )
        missing = set(ids) - {i for _, i in visible}
        if missing:
            raise ApiProblem(
                404,
                "dead_letter_not_found",
                f"no dead letter {sorted(missing)[:5]} is visible to this token; nothing was done",
            )
        for tenant in {t for t, _ in visible}:
            require_act(request.user, tenant)
        qs = engine_dead_letters.dead_letter_select(ids=ids)
        return None, list(qs.values_list("id", flat=True))
    f = body.filter
    assert f is not None
    if f.tenant:
        require_act(request.user, f.tenant)
    tenants = [f.tenant] if f.tenant else access.acting_tenants(request.user)
    if not tenants:
        raise ApiProblem(403, "forbidden", "redriving needs the operator role in a tenant")
    scope = DeadLetterFilter(
        tenants=tuple(tenants),
        workflow=f.workflow,
        step_name=f.step_name,
        signature=f.signature,
        since=selectors.as_utc(f.since, what="since"),
        until=selectors.as_utc(f.until, what="until"),
    )
    return scope, list(engine_dead_letters.dead_letter_select(filter=scope).values_list("id", flat=True))


def _snapshot(body: SelectionIn, ids: list[int]) -> selection.Snapshot:
    chosen = body.filter.model_dump(mode="json") if body.filter is not None else {}
    explicit = None if body.ids is None else selection.ids_parse(str(i) for i in body.ids)
    return selection.Snapshot(_ACTION, chosen, explicit, sorted(ids))


@router.post(
    "/redrive/preview",
    response={200: PreviewOut, **s.ERRORS},
    summary="Count a redrive's selection; its token confirms exactly this set",
)
def dead_letter_redrive_preview(request: HttpRequest, body: SelectionIn) -> dict[str, Any]:
    _, ids = _scope(request, body)
    token = selection.token_issue(user_id=request.user.pk, snapshot=_snapshot(body, ids))
    for_good = sorted(d["id"] for d in redrive_failed_for_good(dead_letter_ids=ids))
    return {"count": len(ids), "ids": sorted(ids), "token": token, "non_retryable_ids": for_good}


class RedriveIn(SelectionIn):
    # A redrive by filter also sends its preview's token.
    model_config = ConfigDict(json_schema_extra={"anyOf": [_IDS_ALONE, {**_TOKEN, "anyOf": [_IDS, _FILTER]}]})
    token: str | None = Field(None, max_length=200_000)
    rate_per_second: float = Field(5.0, gt=0, le=100)
    reason: str = Field(..., min_length=1, max_length=2000, json_schema_extra={"pattern": NONBLANK_PATTERN})


def _check_token(request: HttpRequest, body: RedriveIn, ids: list[int]) -> None:
    if body.filter is not None and not body.token:
        raise ApiProblem(
            400,
            "preview_required",
            "a redrive by filter acts on the set its preview "
            "counted: POST the same selection to /api/dead-letters/redrive/preview and "
            "send its token; nothing was done",
        )
    if not body.token:
        return
    try:
        snap = selection.token_read(body.token, user_id=request.user.pk, action=_ACTION)
    except selection.SelectionError as exc:
        raise ApiProblem(403, "invalid_token", str(exc)) from None  # it does not verify: no permission
    if (snap.filters, snap.ids) != (_snapshot(body, ids).filters, _snapshot(body, ids).ids):
        raise ApiProblem(
            409, "token_mismatch", "the token was issued for another selection; preview this one; nothing was done"
        )
    change = selection.selection_change(snap.selected, ids)
    if change is not None:
        raise ApiProblem(
            409,
            "selection_changed",
            f"the selection changed since the preview: "
            f"{len(change.added)} added, {len(change.removed)} removed; preview again "
            "and confirm the new count; nothing was done",
        )


@router.post(
    "/redrive", response={200: s.RedriveOut, **s.ERRORS}, summary="Redrive the selected dead letters at a capped rate"
)
def dead_letter_redrive(request: HttpRequest, body: RedriveIn) -> dict[str, int]:
    scope, ids = _scope(request, body)
    _check_token(request, body, ids)
    if not ids:
        return {"redriven": 0}
    chosen: dict[str, Any] = (
        {"ids": ids} if body.filter is None else {"filter": body.filter.model_dump(mode="json", exclude_none=True)}
    )
    tenants = DeadLetter.objects.filter(id__in=ids).values_list("tenant", flat=True).distinct()
    try:
        count = dead_letters_redrive(
            user=request.user,
            origin=Origin.of_request(request, source=AuditSource.API),
            ids=ids,
            scope=scope,
            rate_per_second=body.rate_per_second,
            reason=body.reason,
            selection=chosen,
            tenants=set(tenants),
        )
    except ActionRefused as exc:
        raise ApiProblem(exc.status, exc.code, exc.message) from None
    return {"redriven": count}


class LetterIn(s.InputSchema):
    reason: str = Field(..., min_length=1, max_length=2000, json_schema_extra={"pattern": NONBLANK_PATTERN})
    expected_version: str | None = Field(None, pattern=VERSION_PATTERN, description=s.EXPECTED_VERSION)


def _letter(request: HttpRequest, dead_letter_id: int, action: LetterAction, body: LetterIn) -> DeadLetterItem:
    if not body.reason.strip():  # the pattern's rule, said by this endpoint
        raise ApiProblem(
            400,
            "invalid_arguments",
            "give a reason: it is kept with the dead letter and in the audit log (nothing was done)",
        )
    try:
        dead_letter_act(
            user=request.user,
            origin=Origin.of_request(request, source=AuditSource.API),
            dead_letter_id=dead_letter_id,
            action=action,
            reason=body.reason,
            expected_version=body.expected_version,
        )
    except ActionRefused as exc:
        raise ApiProblem(exc.status, exc.code, exc.message) from None
    letter = DeadLetter.objects.get(pk=dead_letter_id)
    return dead_letter_items(tenants=[letter.tenant], filters=DeadLetterFilters(state=""), ids=[letter.id])[0]


@router.post(
    "/{dead_letter_id}/retry",
    response={200: DeadLetterItem, **s.ERRORS},
    summary="Retry one dead letter's instance from its failed step",
    description="Refused (409 `stale`) when the letter moved since the `version` sent as "
    "expected_version (discarded, redriven, dead-lettered again). A letter whose "
    "`non_retryable` is true fails the same way: replay its instance with edited params.",
)
def dead_letter_retry(request: HttpRequest, dead_letter_id: int, body: LetterIn) -> DeadLetterItem:
    return _letter(request, dead_letter_id, "retry", body)


@router.post(
    "/{dead_letter_id}/discard",
    response={200: DeadLetterItem, **s.ERRORS},
    summary="Discard one dead letter (nothing runs)",
    description="Refused (409 `stale`) when the letter moved since the `version` sent as expected_version.",
)
def dead_letter_discard(request: HttpRequest, dead_letter_id: int, body: LetterIn) -> DeadLetterItem:
    return _letter(request, dead_letter_id, "discard", body)
