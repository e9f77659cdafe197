"""Secrets never reach a log line: query-string values, Authorization headers, webhook keys.

Pure functions over text, and a logging filter that applies them to the whole formatted
message and traceback of every record a handler emits (attached to the handlers, not the
loggers, so records that propagate from daphne, Django or a library pass through it too).
"""

from __future__ import annotations

import logging
import re

MASK = "[redacted]"

# Parameter names whose values are secrets wherever they appear as name=value (a query string,
# a form body, a repr). Matched whole or after a prefix ending in _ . or - (api_key, x-signature),
# not inside a word (monkey=1 stays).
SECRET_NAMES = ("key", "token", "secret", "signature", "password", "passwd", "sig", "auth",
                "authorization", "apikey", "api_key", "access_token", "refresh_token",
                "client_secret")

# name=value in a query string or a form body: the value runs to the next & ; space or quote.
# The name is a whole run of [\w.-] (the lookbehind starts it only where a run starts), and
# `_secret_name` judges it in Python: a pattern that tried every prefix inside the run took
# seconds on a long header like "a.a.a.…" (quadratic backtracking), on every log line.
_PAIR = re.compile(r"(?<![\w.-])([\w.-]+)=([^&;\s'\"]+)")
_SECRET_NAMES = frozenset(SECRET_NAMES)


def _secret_name(name: str) -> bool:
    """Whole, or after a prefix ending in _ . or - (api_key, x-signature); not inside a word."""
    name = name.lower()
    if name in _SECRET_NAMES:
        return True
    return any(name.endswith(sep + secret) for secret in SECRET_NAMES for sep in "_.-")


def _mask_pair(match: re.Match[str]) -> str:
    return f"{match.group(1)}={MASK}" if _secret_name(match.group(1)) else match.group(0)
# "Authorization: Bearer abc", "authorization': 'Basic abc" (a repr of headers), X-Api-Key: ...
_HEADER = re.compile(
    r"(?i)((?:authorization|proxy-authorization|x-api-key|x-runledger-signature|cookie)"
    r"['\"]?\s*[:=]\s*['\"]?)(?:(?:bearer|basic|token)\s+)?[^\s'\",;]+"
)
# Webhooks carry their key in the path: /hooks/gong/<key>, /hooks/salesforce/<key>/cdc.
_HOOK = re.compile(r"(/hooks/[\w-]+/)[^/\s?'\"]+")


def redact(text: str) -> str:
    """`text` with every secret value replaced by [redacted]."""
    if not text:
        return text
    text = _HEADER.sub(lambda m: m.group(1) + MASK, text)
    text = _PAIR.sub(_mask_pair, text)
    return _HOOK.sub(lambda m: m.group(1) + MASK, text)


class RedactFilter(logging.Filter):
    """Rewrites a record in place: its message (args merged), its traceback and string extras.

    The record keeps no args afterwards, so no formatter can re-insert a secret from them."""

    # Attributes a formatter may print besides the message (our access log's fields).
    EXTRA_TEXT = ("path", "url", "query")

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed call still gets logged, as logging does
            message = str(record.msg)
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        for name in self.EXTRA_TEXT:
            value = getattr(record, name, None)
            if isinstance(value, str):
                setattr(record, name, redact(value))
        return True
