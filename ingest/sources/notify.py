"""Outbound notifications: a JSON POST to a webhook (signed as our own ingress verifies, or
plain for a Slack-compatible incoming webhook) and an email through Django's mail backends.

The alert and callback deliveries call these inside a step, so every failure is a
`NotifyError` with `retryable` and `retry_after` for the engine's retry policy: 5xx, 429 and
network errors are worth another attempt; any other 4xx is not (the receiver refused it).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from email.utils import parseaddr
from typing import Any
from urllib.parse import urlsplit

import requests
from django.core.mail import EmailMessage, get_connection

from ingest.sources.errors import SourceError
from ingest.sources.http import body_excerpt, new_session, retry_after_seconds
from ingest.triggers.signing import sign_all

TIMEOUT = (5.0, 15.0)
# A webhook target as the API's schema states it: http(s), a host name, an optional port, then a
# path, query or fragment of visible ASCII; no user or password, no space or other byte around it.
URL_PATTERN = r"^https?://[A-Za-z0-9](?:[A-Za-z0-9.-]{0,250}[A-Za-z0-9])?(?::[0-9]{1,5})?(?:[/?#][!-~]*)?$"
_URL = re.compile(URL_PATTERN)
USER_AGENT = "runledger-notify/0.1"
_session: requests.Session | None = None


class NotifyError(SourceError):
    """A notification could not be delivered."""


@dataclass(frozen=True)
class Delivered:
    status: int
    seconds: float


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a webhook target, or None: http(s) with a host, no credentials in it,
    as URL_PATTERN says."""
    parts = urlsplit(url.strip())
    if parts.username or parts.password:
        return "the URL must not carry a user or password; use the channel's HMAC key instead"
    if parts.scheme not in {"http", "https"} or not parts.hostname or not _URL.match(url):
        return (
            f"{url[:80]!r} is not an http(s) URL with a host (an optional port of digits, then a "
            "path of visible ASCII characters, without spaces)"
        )
    return None


def signed_headers(*, secret: str | list[str], body: bytes, now: float | None = None) -> dict[str, str]:
    """The headers our ingress verifies: `X-Runledger-Timestamp` and `X-Runledger-Signature`
    (with several secrets, one signature each, comma-separated, the first secret's first)."""
    stamp = str(int(time.time() if now is None else now))
    secrets = [secret] if isinstance(secret, str) else secret
    return {
        "X-Runledger-Timestamp": stamp,
        "X-Runledger-Signature": sign_all(secrets=secrets, timestamp=stamp, body=body),
    }


def webhook_post(
    *, url: str, payload: dict[str, Any], secret: str | list[str] | None = None, headers: dict[str, str] | None = None
) -> Delivered:
    """POST `payload` as JSON; signed with `secret` (or each of several) when given. Raises
    NotifyError unless 2xx."""
    global _session
    if _session is None:
        _session = new_session()
    body = json.dumps(payload, separators=(",", ":"), default=str).encode("utf-8")
    sent = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **(headers or {})}
    if secret:
        sent.update(signed_headers(secret=secret, body=body))
    host = urlsplit(url).hostname or "?"
    started = time.perf_counter()
    try:
        response = _session.post(url, data=body, headers=sent, timeout=TIMEOUT, allow_redirects=False)
    except requests.RequestException as exc:
        raise NotifyError(f"POST to {host} failed: {type(exc).__name__}: {str(exc)[:200]}", retryable=True) from None
    if 200 <= response.status_code < 300:
        return Delivered(response.status_code, time.perf_counter() - started)
    retryable = response.status_code >= 500 or response.status_code in (408, 429)
    raise NotifyError(
        f"POST to {host} answered {response.status_code}: {body_excerpt(response)}",
        retryable=retryable,
        status=response.status_code,
        retry_after=retry_after_seconds(response.headers),
    )


def address_problem(address: str) -> str | None:
    mail = parseaddr(address)[1]
    if not mail or "@" not in mail.strip("@") or " " in mail:
        return f"{address[:80]!r} is not an email address"
    return None


def mail_send(
    *, subject: str, body: str, to: list[str], sender: str, smtp: dict[str, Any] | None = None, password: str = ""
) -> Delivered:
    """Send one email through Django's configured backend, or through the SMTP server the
    channel names (`smtp`: host, port, username, use_tls). Raises NotifyError on failure."""
    started = time.perf_counter()
    try:
        if smtp and smtp.get("host"):
            connection = get_connection(
                "django.core.mail.backends.smtp.EmailBackend",
                host=smtp["host"],
                port=int(smtp.get("port") or 25),
                username=smtp.get("username") or None,
                password=password or None,
                use_tls=bool(smtp.get("use_tls")),
                timeout=15,
                fail_silently=False,
            )
        else:
            connection = get_connection(fail_silently=False)
        sent = EmailMessage(subject=subject, body=body, from_email=sender, to=to, connection=connection).send()
    except OSError as exc:  # smtplib's errors are OSErrors: refused, timed out, rejected
        raise NotifyError(
            f"email to {', '.join(to)} failed: {type(exc).__name__}: {str(exc)[:200]}", retryable=True
        ) from None
    if sent != 1:
        raise NotifyError(f"the mail backend sent {sent} messages to {', '.join(to)}", retryable=True)
    return Delivered(250, time.perf_counter() - started)
