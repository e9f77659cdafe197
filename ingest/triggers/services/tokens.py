"""REST API tokens for users and service accounts. Only a token's SHA-256 is stored."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from ingest.triggers import signing
from ingest.triggers.models import ApiToken

_TOUCH_EVERY = timedelta(minutes=1)


def api_token_create(*, user: Any, name: str, expires_at: datetime | None = None
                     ) -> tuple[ApiToken, str]:
    """A new token for `user`: (row, token). The token is shown once; only its hash is kept."""
    token = "rla_" + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(user=user, name=name, token_hash=signing.token_hash(token),
                                  token_prefix=token[:10], expires_at=expires_at)
    return row, token


def api_token_revoke(*, token_id: int, now: datetime) -> None:
    ApiToken.objects.filter(pk=token_id, revoked_at__isnull=True).update(revoked_at=now)


def api_token_authenticate(*, token: str, now: datetime) -> Any | None:
    """The active user a live token belongs to, or None. Touches `last_used_at` once a minute."""
    if not token or len(token) > 200:
        return None
    row = (ApiToken.objects.select_related("user")
           .filter(token_hash=signing.token_hash(token), revoked_at__isnull=True).first())
    if row is None or not row.user.is_active or (row.expires_at and row.expires_at <= now):
        return None
    if row.last_used_at is None or now - row.last_used_at > _TOUCH_EVERY:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row.user
