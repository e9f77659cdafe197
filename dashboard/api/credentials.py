"""/api/ingress-credentials: the tenants' ingress credentials by prefix, made, rotated, disabled,
enabled and deleted.

A credential's token and HMAC secret are in the answer to the request that made them (create or
rotate, never cached) and nowhere else, ever: a list shows prefixes, the audit entry records who
and why, never the pair. A rotation says why and how long the replaced pair keeps working (default
one hour, 0: it stops at once); the console and the CLI call the same service."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, get_type_hints

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Router, Schema, Status
from pydantic import create_model

from dashboard import access
from dashboard.api import schemas as s
from dashboard.api import trigger_schemas as ts
from dashboard.api.audit import acted
from dashboard.api.auth import require_act
from dashboard.api.errors import ApiProblem
from dashboard.selectors import routes as sel
from ingest.triggers.services import (
    ingress_secret_create,
    ingress_secret_delete,
    ingress_secret_rotate,
    ingress_secret_set_enabled,
)

router = Router(tags=["ingress credentials"])
E: dict[int, Any] = {400: s.ErrorOut, 401: s.ErrorOut, 403: s.ErrorOut, 404: s.ErrorOut, 422: s.ErrorOut}


# A credential as the API shows it is the selector's row, field for field: the schema is made from
# the row's fields, so the two cannot drift. The checker sees it as the Schema it is.
if TYPE_CHECKING:
    CredentialOut = Schema
else:
    CredentialOut = create_model(
        "CredentialOut", __base__=Schema, **{name: (hint, ...) for name, hint in get_type_hints(sel.Credential).items()}
    )


class PairOut(Schema):
    tenant: str
    name: str
    token: str
    secret: str
    previous_valid_until: datetime | None = None


def _pair(row: Any, token: str, secret: str) -> dict[str, Any]:
    return {
        "tenant": row.tenant,
        "name": row.name,
        "token": token,
        "secret": secret,
        "previous_valid_until": row.previous_valid_until,
    }


@router.get(
    "/ingress-credentials",
    response={200: list[CredentialOut], **E},
    summary="Ingress credentials: prefixes only, never a token or secret",
)
def credential_list(request: HttpRequest) -> list[sel.Credential]:
    return sel.credentials(tenants=access.tenants_for(request.user), now=timezone.now())


@router.post(
    "/ingress-credentials",
    response={201: PairOut, **E, 409: s.ErrorOut},
    summary="A new credential: its token and HMAC secret are in this answer only",
)
def credential_create(request: HttpRequest, response: HttpResponse, body: ts.CredentialIn) -> Status[dict[str, Any]]:
    if isinstance(body.tenant, str):
        require_act(request.user, body.tenant)
    response["Cache-Control"] = "no-store"
    row, token, secret = acted(
        request,
        action="ingress_secret.create",
        tenants=[body.tenant] if isinstance(body.tenant, str) else [],
        selection={"tenant": body.tenant, "name": body.name, "rate_limit_per_minute": body.rate_limit_per_minute},
        run=lambda: ingress_secret_create(
            tenant=body.tenant, name=body.name, rate_limit_per_minute=body.rate_limit_per_minute
        ),
    )
    return Status(201, _pair(row, token, secret))


@router.post(
    "/ingress-credentials/{tenant}/{name}/rotate",
    response={200: PairOut, **E},
    summary="New token and secret, in this answer only; the old pair works for overlap_seconds more",
)
def credential_rotate(
    request: HttpRequest, response: HttpResponse, tenant: str, name: str, body: ts.RotateIn
) -> dict[str, Any]:
    require_act(request.user, tenant)
    if sel.credential_get(tenant=tenant, name=name, tenants=[tenant], now=timezone.now()) is None:
        raise ApiProblem(
            404, "ingress_secret_not_found", f"tenant {tenant[:100]!r} has no ingress credential named {name[:100]!r}"
        )
    response["Cache-Control"] = "no-store"
    reason = body.reason if isinstance(body.reason, str) else ""
    row, token, secret = acted(
        request,
        action="ingress_secret.rotate",
        tenants=[tenant],
        reason=reason,
        selection={"tenant": tenant, "name": name, "overlap_seconds": body.overlap_seconds},
        run=lambda: ingress_secret_rotate(
            tenant=tenant, name=name, now=timezone.now(), overlap_seconds=body.overlap_seconds, reason=body.reason
        ),
    )
    return _pair(row, token, secret)


class CredentialDeletedOut(Schema):
    tenant: str
    name: str
    deleted: bool


def _credential(request: HttpRequest, tenant: str, name: str) -> sel.Credential:
    require_act(request.user, tenant)
    row = sel.credential_get(tenant=tenant, name=name, tenants=[tenant], now=timezone.now())
    if row is None:
        raise ApiProblem(
            404, "ingress_secret_not_found", f"tenant {tenant[:100]!r} has no ingress credential named {name[:100]!r}"
        )
    return row


def _set(request: HttpRequest, tenant: str, name: str, enabled: bool) -> sel.Credential:
    _credential(request, tenant, name)
    acted(
        request,
        action="ingress_secret.enable" if enabled else "ingress_secret.disable",
        tenants=[tenant],
        selection={"tenant": tenant, "name": name},
        run=lambda: ingress_secret_set_enabled(tenant=tenant, name=name, enabled=enabled),
    )
    return _credential(request, tenant, name)


@router.post(
    "/ingress-credentials/{tenant}/{name}/enable",
    response={200: CredentialOut, **E},
    summary="Enable a credential: requests signed with it are accepted again",
)
def credential_enable(request: HttpRequest, tenant: str, name: str) -> sel.Credential:
    return _set(request, tenant, name, True)


@router.post(
    "/ingress-credentials/{tenant}/{name}/disable",
    response={200: CredentialOut, **E},
    summary="Disable a credential: requests signed with it answer 401 until it is enabled",
)
def credential_disable(request: HttpRequest, tenant: str, name: str) -> sel.Credential:
    return _set(request, tenant, name, False)


@router.delete(
    "/ingress-credentials/{tenant}/{name}",
    response={200: CredentialDeletedOut, **E},
    summary="Delete a credential: requests signed with it (or its kept old pair) answer 401 for good",
)
def credential_delete(request: HttpRequest, tenant: str, name: str) -> dict[str, Any]:
    _credential(request, tenant, name)
    acted(
        request,
        action="ingress_secret.delete",
        tenants=[tenant],
        selection={"tenant": tenant, "name": name},
        run=lambda: ingress_secret_delete(tenant=tenant, name=name),
    )
    return {"tenant": tenant, "name": name, "deleted": True}
