"""/api/connections: each tenant's connections to Gong, Salesforce, its LLM provider, DataForSEO
and ZenRows; create, edit, enable, disable, delete and test (one cheap call through the real
client), through the same services as the console (every wrong field named at once, nothing
written on a refusal). Secrets are write-only: a body may set one, no answer carries more of it
than whether it is set and its masked end; an edit that sends an empty secret keeps the stored one.
An edit, enable, disable or delete may name the `version` a read answered: a connection saved since
is refused with 409 connection_changed."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Schema, Status
from pydantic import ConfigDict
from pydantic.config import JsonDict

from dashboard import access
from dashboard.api import schemas as s
from dashboard.api.audit import acted
from dashboard.api.auth import require_act
from dashboard.api.errors import ApiProblem
from dashboard.api.trigger_schemas import BOOLEAN, TENANT, checked
from dashboard.selectors import connections as sel
from ingest.pipelines.connections import (
    COMMON_FIELDS,
    EVERY_FIELD,
    KIND_FIELDS,
    PROVIDERS,
    REQUIRED,
    RESERVED_OPTIONS,
    SECRET_MAX,
    TEXT_MAX,
    TEXT_PATTERN,
    URL_MAX,
    URL_PATTERN,
    connection_audit_fields,
    connection_create,
    connection_delete,
    connection_set_enabled,
    connection_test,
    connection_update,
)
from ingest.pipelines.cursors import LOOKBACK_OPTION, MOST_LOOKBACK_MINUTES

router = Router(tags=["connections"])
E: dict[int, Any] = {400: s.ErrorOut, 401: s.ErrorOut, 403: s.ErrorOut, 404: s.ErrorOut, 422: s.ErrorOut}
KINDS = ["gong", "salesforce", "llm", "dataforseo", "zenrows"]
VERSION = r"^[0-9]{1,20}$"
_TEXT = {"type": "string", "maxLength": TEXT_MAX, "pattern": TEXT_PATTERN}
_SECRET = {"type": "string", "maxLength": SECRET_MAX, "pattern": TEXT_PATTERN}
OPTIONS = {
    "type": "object",
    "properties": {
        "reconcile": {"type": "boolean"},
        LOOKBACK_OPTION: {"type": "integer", "minimum": 1, "maximum": MOST_LOOKBACK_MINUTES},
        "rate_limit": {
            "type": "object",
            "required": ["per_second", "burst"],
            "additionalProperties": False,
            "properties": {
                "per_second": {"type": "number", "exclusiveMinimum": 0, "maximum": 100_000},
                "burst": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
            },
        },
    },
    "not": {"anyOf": [{"required": [name]} for name in RESERVED_OPTIONS]},
}


def _by_kind() -> list[dict[str, Any]]:
    """Each kind's own rules: the secrets it needs (non-empty), the fields it does not take."""
    rules: list[dict[str, Any]] = []
    for kind, fields in KIND_FIELDS.items():
        needed = list(REQUIRED[kind])
        then: dict[str, Any] = {"properties": {name: {"minLength": 1} for name in needed}}
        if needed:
            then["required"] = needed
        foreign = [f for f in EVERY_FIELD if f not in fields and f not in COMMON_FIELDS]
        then["not"] = {"anyOf": [{"required": [name]} for name in foreign]}
        rules.append({"if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]}, "then": then})
    # Anthropic has no keyless local servers: its API key is needed.
    rules.append(
        {
            "if": {
                "properties": {"kind": {"const": "llm"}, "provider": {"const": "anthropic"}},
                "required": ["kind", "provider"],
            },
            "then": {"required": ["secret"], "properties": {"secret": {"minLength": 1}}},
        }
    )
    return rules


class _Fields(s.InputSchema):
    base_url: Any = checked(None, type="string", maxLength=URL_MAX, pattern=URL_PATTERN)
    key: Any = checked(None, **_SECRET)
    secret: Any = checked(None, **_SECRET)
    refresh_token: Any = checked(None, **_SECRET)
    webhook_key: Any = checked(None, **_SECRET)
    provider: Any = checked(None, type="string", enum=list(PROVIDERS))
    model: Any = checked(None, **_TEXT)
    service: Any = checked(None, **_TEXT)
    organization_id: Any = checked(None, **_TEXT)
    options: Any = checked(None, **OPTIONS)
    enabled: Any = checked(None, **BOOLEAN)


class ConnectionIn(_Fields):
    """A tenant's new connection of `kind`; each kind takes only its own fields and needs its own
    secrets (docs/operators.md, "Source connections")."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=cast("JsonDict", {"allOf": _by_kind()}))
    tenant: Any = checked(..., **TENANT)
    kind: Any = checked(..., type="string", enum=KINDS)


class ConnectionEditIn(_Fields):
    """The settings to change; an empty secret keeps the stored one. `version`: the one a read
    answered (a connection saved since is refused with 409)."""

    version: Any = checked(None, type="string", pattern=VERSION)


class TestOut(Schema):
    ok: bool
    message: str
    tested_at: datetime


class ConnectionDeletedOut(Schema):
    tenant: str
    kind: str
    deleted: bool


def _fields(body: _Fields) -> dict[str, Any]:
    # A null is passed on as sent, for the service to refuse by name: it is not "left out".
    return {k: v for k, v in body.model_dump(exclude_unset=True).items() if k in EVERY_FIELD}


def _get(request: HttpRequest, tenant: str, kind: str) -> sel.ConnectionRow:
    row = sel.connection_get(tenant=tenant, kind=kind, tenants=access.tenants_for(request.user), now=timezone.now())
    if row is None:
        raise ApiProblem(
            404,
            "connection_not_found",
            f"no {kind[:40]} connection of tenant {tenant[:100]!r} is visible to this token",
        )
    return row


def _acting(request: HttpRequest, tenant: str, kind: str) -> sel.ConnectionRow:
    row = _get(request, tenant, kind)
    require_act(request.user, tenant)
    return row


def _version(raw: str | None) -> str | None:
    if raw is not None and not (raw.isdigit() and len(raw) <= 20):
        raise ApiProblem(400, "invalid_version", "version is the digits a read of the connection answered")
    return raw


@router.get(
    "/connections",
    response={200: list[sel.ConnectionRow], **E},
    summary="Connections of the token's tenants: settings, secrets as set or not, last test, pull",
)
def connection_list(request: HttpRequest) -> list[sel.ConnectionRow]:
    return sel.connection_rows(tenants=access.tenants_for(request.user), now=timezone.now())


@router.post(
    "/connections",
    response={201: sel.ConnectionRow, **E, 409: s.ErrorOut},
    summary="Create a connection (every wrong field named at once; nothing is created on a refusal)",
)
def connection_create_view(request: HttpRequest, body: ConnectionIn) -> Status[sel.ConnectionRow]:
    tenant, kind, fields = body.tenant, body.kind, _fields(body)
    if isinstance(tenant, str):
        require_act(request.user, tenant)
    acted(
        request,
        action="connection.create",
        tenants=[tenant] if isinstance(tenant, str) else [],
        selection={"tenant": tenant, "kind": kind, **connection_audit_fields(fields)},
        run=lambda: connection_create(tenant=tenant, kind=kind, **fields),
    )
    return Status(201, _get(request, tenant, kind))


@router.get("/connections/{tenant}/{kind}", response={200: sel.ConnectionRow, **E}, summary="A connection")
def connection_get(request: HttpRequest, tenant: str, kind: str) -> sel.ConnectionRow:
    return _get(request, tenant, kind)


@router.patch(
    "/connections/{tenant}/{kind}",
    response={200: sel.ConnectionRow, **E, 409: s.ErrorOut},
    summary="Edit a connection (an empty secret keeps the stored one; nothing changes on a refusal)",
)
def connection_edit(request: HttpRequest, tenant: str, kind: str, body: ConnectionEditIn) -> sel.ConnectionRow:
    _acting(request, tenant, kind)
    fields, version = _fields(body), body.version
    if not fields:
        raise ApiProblem(400, "nothing_to_change", f"send at least one of {', '.join(EVERY_FIELD)}")
    acted(
        request,
        action="connection.update",
        tenants=[tenant],
        selection={"tenant": tenant, "kind": kind, **connection_audit_fields(fields)},
        run=lambda: connection_update(tenant=tenant, kind=kind, version=version, **fields),
    )
    return _get(request, tenant, kind)


@router.delete(
    "/connections/{tenant}/{kind}",
    response={200: ConnectionDeletedOut, **E, 409: s.ErrorOut},
    summary="Delete a connection and its secrets; its workflows fall back on the environment",
)
def connection_delete_view(request: HttpRequest, tenant: str, kind: str, version: str | None = None) -> dict[str, Any]:
    _acting(request, tenant, kind)
    checked_version = _version(version)
    acted(
        request,
        action="connection.delete",
        tenants=[tenant],
        selection={"tenant": tenant, "kind": kind},
        run=lambda: connection_delete(tenant=tenant, kind=kind, version=checked_version),
    )
    return {"tenant": tenant, "kind": kind, "deleted": True}


def _set(request: HttpRequest, tenant: str, kind: str, enabled: bool, version: str | None) -> sel.ConnectionRow:
    _acting(request, tenant, kind)
    checked_version = _version(version)
    acted(
        request,
        action="connection.enable" if enabled else "connection.disable",
        tenants=[tenant],
        selection={"tenant": tenant, "kind": kind},
        run=lambda: connection_set_enabled(tenant=tenant, kind=kind, enabled=enabled, version=checked_version),
    )
    return _get(request, tenant, kind)


@router.post(
    "/connections/{tenant}/{kind}/enable",
    response={200: sel.ConnectionRow, **E, 409: s.ErrorOut},
    summary="Enable a connection",
)
def connection_enable(request: HttpRequest, tenant: str, kind: str, version: str | None = None) -> sel.ConnectionRow:
    return _set(request, tenant, kind, True, version)


@router.post(
    "/connections/{tenant}/{kind}/disable",
    response={200: sel.ConnectionRow, **E, 409: s.ErrorOut},
    summary="Disable a connection: its workflows use the environment's settings meanwhile",
)
def connection_disable(request: HttpRequest, tenant: str, kind: str, version: str | None = None) -> sel.ConnectionRow:
    return _set(request, tenant, kind, False, version)


@router.post(
    "/connections/{tenant}/{kind}/test",
    response={200: TestOut, **E},
    summary="One cheap, unbilled call through the real client; the outcome is kept on the connection",
)
def connection_test_view(request: HttpRequest, tenant: str, kind: str) -> dict[str, Any]:
    _acting(request, tenant, kind)
    outcome = acted(
        request,
        action="connection.test",
        tenants=[tenant],
        selection={"tenant": tenant, "kind": kind},
        run=lambda: connection_test(tenant=tenant, kind=kind, now=timezone.now()),
    )
    return {"ok": outcome.ok, "message": outcome.message, "tested_at": outcome.tested_at}
