"""REST API tokens for users and service accounts. Only a token's SHA-256 is stored."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from ingest.triggers import signing
from ingest.triggers.errors import ApiTokenNotFound, InvalidApiToken
from ingest.triggers.models import ApiToken

_TOUCH_EVERY = timedelta(minutes=1)
NAME_MAX = 100
# Ten years: far enough for a service account, near enough that a typo (36500) is caught.
EXPIRES_DAYS_MAX = 3650


def api_token_expiry(*, days: int | None, now: datetime) -> datetime | None:
    """When a token made `now` to live `days` days expires (None: never); InvalidApiToken when
    `days` is not between 1 and EXPIRES_DAYS_MAX."""
    if days is None:
        return None
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= EXPIRES_DAYS_MAX:
        raise InvalidApiToken(
            f"expiry must be a whole number of days from 1 to {EXPIRES_DAYS_MAX}, "
            f"or empty for a token that does not expire; got {days!r}"
        )
    return now + timedelta(days=days)


def api_token_create(
    *, user: Any, name: str, expires_at: datetime | None = None, now: datetime | None = None
) -> tuple[ApiToken, str]:
    """A new token for `user`: (row, token). The token is shown once; only its hash is kept.

    InvalidApiToken for an empty or over-long name, or an expiry not after `now`."""
    name = name.strip() if isinstance(name, str) else ""
    if not name or len(name) > NAME_MAX:
        raise InvalidApiToken(f'a token\'s name is 1 to {NAME_MAX} characters, e.g. "laptop cli"; got {len(name)}')
    if expires_at is not None and now is not None and expires_at <= now:
        raise InvalidApiToken("a token's expiry must be in the future")
    token = "rla_" + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(
        user=user, name=name, token_hash=signing.token_hash(token), token_prefix=token[:10], expires_at=expires_at
    )
    return row, token


def api_token_revoke(*, token_id: int, now: datetime, user: Any | None = None) -> ApiToken:
    """Revoke a token at once (a request with it is refused from `now`). With `user`, only a
    token of that user: another user's id is ApiTokenNotFound, as is an unknown id. Revoking a
    revoked token keeps its first revocation time."""
    with transaction.atomic():
        rows = ApiToken.objects.select_for_update()
        if user is not None:
            rows = rows.filter(user=user)
        row = rows.filter(pk=token_id).first()
        if row is None:
            raise ApiTokenNotFound(
                f"no API token with id {token_id} belongs to {user.get_username() if user is not None else 'any user'}"
            )
        if row.revoked_at is None:
            row.revoked_at = now
            row.save(update_fields=["revoked_at"])
    return row


def api_token_authenticate(*, token: str, now: datetime) -> Any | None:
    """The active user a live token belongs to, or None. Touches `last_used_at` once a minute."""
    if not token or len(token) > 200:
        return None
    row = (
        ApiToken.objects.select_related("user")
        .filter(token_hash=signing.token_hash(token), revoked_at__isnull=True)
        .first()
    )
    if row is None or not row.user.is_active or (row.expires_at and row.expires_at <= now):
        return None
    if row.last_used_at is None or now - row.last_used_at > _TOUCH_EVERY:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row.user
