"""Ingress credentials: create, rotate with an overlap, disable, delete, and the pair a request's
token selects.

A credential is a bearer token and an HMAC secret, both shown once (to whoever creates or rotates
it) and never readable again: the token is stored as its SHA-256, the secret encrypted. A rotation
keeps the replaced pair for the overlap the operator chooses (default one hour; zero ends it at
once), so callers can move to the new pair without a refused request; a second rotation during an
overlap ends the first one's (one previous pair is kept, never two). The console, the REST API
and the CLI all call these, so they refuse the same input with the same messages.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from ingest.triggers import signing
from ingest.triggers.errors import (
    IngressSecretExists,
    IngressSecretNotFound,
    InvalidIngressSecret,
    NotAuthenticated,
)
from ingest.triggers.field_checks import tenant_problem, whole, whole_between
from ingest.triggers.models import IngressSecret

# A credential's name is a path segment of its console and API addresses.
NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$"
_NAME = re.compile(NAME_PATTERN)
RATE_MAX = 1_000_000
OVERLAP_DEFAULT = 3600
OVERLAP_MAX = 7 * 24 * 3600
REASON_MAX = 2000


def _new_pair() -> tuple[str, str]:
    return "rli_" + secrets.token_urlsafe(32), "rls_" + secrets.token_urlsafe(32)


def ingress_secret_problems(*, tenant: Any, name: Any, rate_limit_per_minute: Any = None) -> dict[str, str]:
    """What is wrong with a new credential's fields, by field name (empty when nothing is). Pure."""
    problems: dict[str, str] = {}
    if problem := tenant_problem(tenant):
        problems["tenant"] = problem
    if not isinstance(name, str) or not _NAME.match(name):
        problems["name"] = (
            f"a credential's name is 1 to 100 letters, digits, '_', '.' or '-', such as "
            f"default or shop-webhook; got {str(name)[:60]!r}"
        )
    if rate_limit_per_minute is not None and not whole_between(rate_limit_per_minute, 1, RATE_MAX):
        problems["rate_limit_per_minute"] = (
            f"a rate limit is 1 to {RATE_MAX} requests a minute across the tenant's routes, or empty for none"
        )
    return problems


def ingress_secret_create(
    *, tenant: Any, name: Any = "default", rate_limit_per_minute: Any = None
) -> tuple[IngressSecret, str, str]:
    """A tenant's ingress credentials: (row, bearer token, HMAC secret), shown once; store them.

    InvalidIngressSecret names every wrong field at once; IngressSecretExists when the tenant
    already has a credential of that name and nothing else is wrong."""
    problems = ingress_secret_problems(tenant=tenant, name=name, rate_limit_per_minute=rate_limit_per_minute)
    if not problems and IngressSecret.objects.filter(tenant=tenant, name=name).exists():
        raise IngressSecretExists(
            problems={
                "name": f"tenant {tenant!r} already has a credential named "
                f"{name!r}; pick another name, or rotate that one"
            }
        )
    if problems:
        raise InvalidIngressSecret(problems=problems)
    token, hmac_secret = _new_pair()
    row = IngressSecret.objects.create(
        tenant=tenant,
        name=name,
        token_hash=signing.token_hash(token),
        token_prefix=token[:10],
        hmac_secret=hmac_secret,
        rate_limit_per_minute=whole(rate_limit_per_minute),
    )
    return row, token, hmac_secret


def rotation_problems(*, overlap_seconds: Any, reason: Any) -> dict[str, str]:
    """What is wrong with a rotation's overlap and reason, by field name. Pure."""
    problems: dict[str, str] = {}
    if not whole_between(overlap_seconds, 0, OVERLAP_MAX):
        problems["overlap_seconds"] = (
            f"the old pair keeps working 0 to {OVERLAP_MAX} seconds (7 days) after the rotation; 0 stops it at once"
        )
    if not isinstance(reason, str) or not reason.strip() or len(reason) > REASON_MAX:
        problems["reason"] = (
            f"say why it is rotated (1 to {REASON_MAX} characters): it is kept in the audit "
            'log, e.g. "yearly rotation" or "token pasted in a ticket"'
        )
    return problems


def ingress_secret_rotate(
    *, tenant: str, name: str, now: datetime, overlap_seconds: Any, reason: Any
) -> tuple[IngressSecret, str, str]:
    """A new bearer token and HMAC secret for a credential: (row, token, secret), shown once and
    never readable again. The replaced pair keeps working `overlap_seconds` from `now` (0: it stops
    at once); a pair an earlier rotation kept stops now. InvalidIngressSecret (every problem at
    once) and IngressSecretNotFound change nothing. `reason` is checked here and recorded by the
    caller's audit entry."""
    problems = rotation_problems(overlap_seconds=overlap_seconds, reason=reason)
    if problems:
        raise InvalidIngressSecret(problems=problems)
    token, hmac_secret = _new_pair()
    with transaction.atomic():
        row = IngressSecret.objects.select_for_update().filter(tenant=tenant, name=name).first()
        if row is None:
            raise IngressSecretNotFound(f"tenant {tenant[:100]!r} has no ingress credential named {name[:100]!r}")
        overlap = whole(overlap_seconds) or 0
        if overlap:
            row.previous_token_hash, row.previous_token_prefix = row.token_hash, row.token_prefix
            row.previous_hmac_secret = row.hmac_secret
            row.previous_valid_until = now + timedelta(seconds=overlap)
        else:
            _forget_previous(row)
        row.token_hash, row.token_prefix = signing.token_hash(token), token[:10]
        row.hmac_secret = hmac_secret
        row.rotated_at = now
        row.save()
    return row, token, hmac_secret


def ingress_secret_set_enabled(*, tenant: str, name: str, enabled: bool) -> IngressSecret:
    """Enable or disable a credential: a disabled one signs nothing (its requests answer 401)
    until it is enabled again; its pair is kept. IngressSecretNotFound changes nothing."""
    with transaction.atomic():
        row = IngressSecret.objects.select_for_update().filter(tenant=tenant, name=name).first()
        if row is None:
            raise IngressSecretNotFound(f"tenant {tenant[:100]!r} has no ingress credential named {name[:100]!r}")
        row.enabled = enabled
        row.save(update_fields=["enabled"])
    return row


def ingress_secret_delete(*, tenant: str, name: str) -> IngressSecret:
    """Delete a credential: its token and secret (and a pair kept by a rotation) are refused with
    401 from now on, for good. The returned copy holds no secret."""
    with transaction.atomic():
        row = IngressSecret.objects.select_for_update().filter(tenant=tenant, name=name).first()
        if row is None:
            raise IngressSecretNotFound(f"tenant {tenant[:100]!r} has no ingress credential named {name[:100]!r}")
        gone = IngressSecret(
            pk=row.pk, tenant=row.tenant, name=row.name, token_prefix=row.token_prefix, enabled=row.enabled
        )
        row.delete()
    return gone


def _forget_previous(row: IngressSecret) -> None:
    row.previous_token_hash, row.previous_token_prefix = None, ""
    row.previous_hmac_secret, row.previous_valid_until = None, None


def ingress_secrets_expire(*, now: datetime) -> int:
    """Erase the previous pairs whose overlap has ended (the scheduler calls this every 5 minutes;
    an ended pair is refused whether or not it is erased yet). How many were erased."""
    erased = 0
    with transaction.atomic():
        for row in IngressSecret.objects.select_for_update().filter(previous_valid_until__lte=now):
            _forget_previous(row)
            row.save(
                update_fields=[
                    "previous_token_hash",
                    "previous_token_prefix",
                    "previous_hmac_secret",
                    "previous_valid_until",
                ]
            )
            erased += 1
    return erased


def credential_secret(credential: IngressSecret, *, token_hash: str, now: datetime) -> str:
    """The HMAC secret that must sign a request whose token hashes to `token_hash`: the current
    pair's, or the replaced pair's while its overlap lasts. NotAuthenticated once it has ended
    (or for a token that is neither)."""
    if token_hash == credential.token_hash:
        return str(credential.hmac_secret)
    until = credential.previous_valid_until
    if (
        token_hash == credential.previous_token_hash
        and credential.previous_hmac_secret
        and until is not None
        and now < until
    ):
        return str(credential.previous_hmac_secret)
    raise NotAuthenticated(
        f"the ingress token was replaced when credential {credential.tenant}/{credential.name} was rotated, "
        "and the time the old pair kept working has ended; sign with the new token and secret"
    )
