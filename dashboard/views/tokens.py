"""The API tokens page: each signed-in user makes, lists and revokes their own tokens for the
REST API and the `runledger` CLI. A new token is shown once, in the answer to the POST that made
it (never cached, never redirected to): only its SHA-256 and its first characters are kept.

Any member of a tenant may manage their own tokens, viewers included: a token acts as its user,
so it can do no more than they can in the console. Another user's token is a 404 here."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from dashboard import access
from dashboard.audit import Audit, Origin, audited
from dashboard.submissions import once
from dashboard.token_forms import ApiTokenForm
from dashboard.views.common import HtmxHttpRequest, page, tenants
from ingest.triggers.errors import ApiTokenNotFound, TriggerError
from ingest.triggers.selectors import ApiTokenRow, api_token_list
from ingest.triggers.services import api_token_create, api_token_expiry, api_token_revoke


def _page(
    request: HtmxHttpRequest, form: ApiTokenForm, *, created: dict[str, Any] | None = None, status: int = 200
) -> HttpResponse:
    rows = api_token_list(user=request.user, now=timezone.now())
    context = {"form": form, "rows": rows, "created": created, "base_url": request.build_absolute_uri("/").rstrip("/")}
    return page(request, "account/tokens.html", context, status=status)


@require_GET
@access.require_role()
def tokens(request: HtmxHttpRequest) -> HttpResponse:
    return _page(request, ApiTokenForm())


@never_cache
@require_POST
@access.require_role()
@once(repeat_to="api-tokens")
def token_create(request: HtmxHttpRequest) -> HttpResponse:
    form = ApiTokenForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    name, days = form.cleaned_data["name"], form.cleaned_data["expires_days"]
    now = timezone.now()
    try:
        expires_at = api_token_expiry(days=days, now=now)
        row, token = audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit(
                "api_token.create",
                tenants(request),
                {"name": name, "expires_at": expires_at.isoformat() if expires_at else None},
            ),
            run=lambda: api_token_create(user=request.user, name=name, expires_at=expires_at, now=now),
        )
    except TriggerError as exc:
        form.add_error(None, str(exc))
        return _page(request, form, status=400)
    created = {"token": token, "name": row.name, "prefix": row.token_prefix, "expires_at": row.expires_at}
    return _page(request, ApiTokenForm(), created=created)


def _own(request: HtmxHttpRequest, token_id: int) -> ApiTokenRow:
    for row in api_token_list(user=request.user, now=timezone.now()):
        if row.id == token_id:
            return row
    raise Http404(f"you have no API token with id {token_id}")


@require_GET
@access.require_role()
def token_revoke_confirm(request: HtmxHttpRequest, token_id: int) -> HttpResponse:
    return page(request, "account/token_revoke.html", {"t": _own(request, token_id)})


@require_POST
@access.require_role()
@once()
def token_revoke(request: HtmxHttpRequest, token_id: int) -> HttpResponse:
    row = _own(request, token_id)
    if row.state == "revoked":
        messages.info(request, f"Token {row.name} ({row.prefix}…) was already revoked.")
        return redirect("api-tokens")
    try:
        audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit("api_token.revoke", tenants(request), {"name": row.name, "prefix": row.prefix}),
            run=lambda: api_token_revoke(token_id=token_id, now=timezone.now(), user=request.user),
        )
    except ApiTokenNotFound as exc:
        raise Http404(str(exc)) from None
    messages.success(request, f"Token {row.name} ({row.prefix}…) revoked: requests with it are refused from now on.")
    return redirect("api-tokens")
