"""Ingress request signing: HMAC-SHA256 of `timestamp + "." + raw body`. Pure functions.

Clients send `X-Runledger-Timestamp: <unix seconds>` and
`X-Runledger-Signature: sha256=<hex>`; see ingest/triggers/README.md for a client snippet.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from datetime import datetime

from ingest.triggers.errors import BadSignature, StaleTimestamp

WINDOW_SECONDS = 300
MAX_SIGNATURES = 4  # signatures read from one header; the rest are ignored
SCHEME = "sha256="
# Unix seconds: up to 12 digits reaches the year 33658. Checked as text before int() so a
# timestamp of hundreds of digits is a 401, not an OverflowError in the clock arithmetic.
_UNIX_SECONDS = re.compile(r"^[0-9]{1,12}$")


def sign(*, secret: str, timestamp: str, body: bytes) -> str:
    """The `X-Runledger-Signature` header value for a body sent at `timestamp`."""
    message = timestamp.encode("ascii") + b"." + body
    return SCHEME + hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def sign_all(*, secrets: list[str], timestamp: str, body: bytes) -> str:
    """The header value signed with each of `secrets`, comma-separated: while a rotation's overlap
    lasts, a receiver that holds either the new or the old secret finds its own signature."""
    return ", ".join(sign(secret=secret, timestamp=timestamp, body=body) for secret in secrets)


def verify(
    *,
    secrets: list[str],
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    now: datetime,
    window_seconds: int = WINDOW_SECONDS,
) -> None:
    """Raise unless `signature` signs `body` at `timestamp` with one of `secrets` within the window.

    Every candidate is compared with `hmac.compare_digest`, so timing does not reveal how much of
    a forged signature was right.
    """
    if not timestamp:
        raise StaleTimestamp(
            "the X-Runledger-Timestamp header is missing; send the unix time in seconds at which the request was signed"
        )
    if not _UNIX_SECONDS.match(timestamp.strip()):
        raise StaleTimestamp(
            f"X-Runledger-Timestamp {timestamp[:40]!r} is not unix seconds (1 to 12 digits); "
            "send the unix time in seconds at which the request was signed"
        )
    sent = int(timestamp.strip())
    skew = abs(now.timestamp() - sent)
    if skew > window_seconds:
        raise StaleTimestamp(
            f"X-Runledger-Timestamp is {skew:.0f} s away from the server clock; requests are "
            f"accepted within {window_seconds} s — sign with the current time (check the clock)"
        )
    if not signature:
        raise BadSignature(
            "the X-Runledger-Signature header is missing; send sha256=<hex HMAC-SHA256 of "
            "timestamp + '.' + body> keyed with the tenant's ingress secret"
        )
    # One signature, or several comma-separated (a sender in the overlap of a rotation of its own
    # signs with both secrets): any one made with any of `secrets` is enough.
    given = [part.strip().encode("ascii", errors="replace") for part in signature.split(",")[:MAX_SIGNATURES]]
    ok = False
    for secret in secrets:
        expected = sign(secret=secret, timestamp=timestamp.strip(), body=body).encode("ascii")
        for one in given:
            ok = hmac.compare_digest(expected, one) or ok
    if not ok:
        raise BadSignature(
            "X-Runledger-Signature does not match the body; sign timestamp + '.' + the exact raw "
            "body bytes with HMAC-SHA256 and the tenant's ingress secret"
        )


def token_hash(token: str) -> str:
    """Tokens are stored as their SHA-256; looking one up by hash is safe against timing."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def body_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()
