"""Secrets out of every text that leaves the process: log lines, the access log, spans, alerts,
callbacks and the error messages the ledger keeps.

One function, `redact`, knows every shape a secret takes in text:

- `name=value` where the name is a secret's (`apikey=…`, `api_key=…`, `token=…`, `x-signature=…`),
  in a query string, a form body or a repr; `"name": "value"` in JSON or a dict's repr;
- an `Authorization`/`Cookie`/`X-Api-Key` header's value, and a `Bearer …` credential anywhere;
- the user and password of a URL (`https://user:password@host`);
- a webhook's key in its path (`/hooks/gong/<key>`, `/hooks/salesforce/<key>/cdc`);
- the literal value of every secret this process has read from or written to an encrypted column
  (`remember`): a connection's API key quoted in an error message has no shape to find it by.

It sits in the engine, the bottom of the import ladder, so every layer applies the same one: the
logging filter and formatters, the access log, the tracing spans, the stored failures, the alert
and callback payloads. Pure, except for the set of remembered values.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

MASK = "[redacted]"

# Parameter names whose values are secrets wherever they appear as name=value (a query string,
# a form body, a repr). Matched whole or after a prefix ending in _ . or - (api_key, x-signature),
# not inside a word (monkey=1 stays).
SECRET_NAMES = (
    "key",
    "token",
    "secret",
    "signature",
    "password",
    "passwd",
    "pwd",
    "sig",
    "auth",
    "authorization",
    "apikey",
    "api_key",
    "access_token",
    "refresh_token",
    "client_secret",
    "credential",
    "credentials",
)
_SECRET_NAMES = frozenset(SECRET_NAMES)

# name=value in a query string or a form body: the value runs to the next & ; space or quote.
# The name is a whole run of [\w.-] (the lookbehind starts it only where a run starts), and
# `secret_name` judges it in Python: a pattern that tried every prefix inside the run took
# seconds on a long header like "a.a.a.…" (quadratic backtracking), on every log line.
_PAIR = re.compile(r"(?<![\w.-])([\w.-]+)=([^&;\s'\"]+)")
# "name": "value" (JSON) and 'name': 'value' (a dict's repr).
_QUOTED_PAIR = re.compile(r"([\"'])([\w.-]{1,64})\1(\s*:\s*)([\"'])([^\"'\\]*)\4")
# "Authorization: Bearer abc", "authorization': 'Basic abc" (a repr of headers), X-Api-Key: ...
_HEADER = re.compile(
    r"(?i)((?:authorization|proxy-authorization|x-api-key|x-runledger-signature|cookie)"
    r"['\"]?\s*[:=]\s*['\"]?)(?:(?:bearer|basic|token)\s+)?[^\s'\",;&]+"
)
_HEADER_CUES = ("authorization", "x-api-key", "x-runledger-signature", "cookie")
# A bearer credential outside a header ("sent Bearer eyJ…"): eight characters at least, so the
# prose "bearer token" stays.
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")
# The userinfo of a URL: scheme://user:password@host.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/@'\"<>]+@")
# Webhooks carry their key in the path: /hooks/gong/<key>, /hooks/salesforce/<key>/cdc.
_HOOK = re.compile(r"(/hooks/[\w-]+/)[^/\s?&#'\"]+")

# Remembered literal values shorter than this are not masked on their own: a short value would
# mask ordinary words, and a real credential is longer.
MIN_LITERAL = 12
MOST_LITERALS = 4096
LONGEST_IN_TRIE = 256  # longer values (rare: a key file) are plain alternatives, keeping recursion shallow
_literals: dict[str, None] = {}  # insertion-ordered: the oldest go first past MOST_LITERALS
_literal_pattern: re.Pattern[str] | None = None
_lock = threading.Lock()


@functools.lru_cache(maxsize=4096)
def secret_name(name: str) -> bool:
    """Whole, or after a prefix ending in _ . or - (api_key, x-signature); not inside a word.
    Cached: the same few names (instance=, workflow=, page=) come back on every line."""
    name = name.lower()
    if name in _SECRET_NAMES:
        return True
    return any(name.endswith(sep + secret) for secret in SECRET_NAMES for sep in "_.-")


def remember(*values: object) -> None:
    """Mask these values wherever they appear from now on, in this process (the clear text of an
    encrypted column as it is read or written). Values shorter than MIN_LITERAL are ignored."""
    global _literal_pattern
    fresh = [v for v in values if isinstance(v, str) and len(v) >= MIN_LITERAL and v not in _literals]
    if not fresh:
        return
    with _lock:
        for value in fresh:
            _literals[value] = None
        while len(_literals) > MOST_LITERALS:
            del _literals[next(iter(_literals))]
        _literal_pattern = re.compile(_alternation(list(_literals)))


def _alternation(values: list[str]) -> str:
    """One pattern matching any of `values`, longest first, as a trie: a line is scanned once
    whatever their number (a plain alternation tried every value at every character)."""
    long = sorted((v for v in values if len(v) > LONGEST_IN_TRIE), key=len, reverse=True)
    trie: dict[str, Any] = {}
    for value in values:
        if len(value) <= LONGEST_IN_TRIE:
            node = trie
            for char in value:
                node = node.setdefault(char, {})
            node[""] = {}
    branches = [re.escape(v) for v in long] + ([_trie(trie)] if trie else [])
    return "|".join(branches)


def _trie(node: dict[str, Any]) -> str:
    ends = "" in node
    alternatives = [re.escape(char) + _trie(child) for char, child in sorted(node.items()) if char]
    if not alternatives:
        return ""
    body = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
    # Greedy: where a value ends and a longer one goes on, the longer one is masked whole.
    return f"(?:{body})?" if ends else body


def forget_all() -> None:
    """Drop every remembered value (tests)."""
    global _literal_pattern
    with _lock:
        _literals.clear()
        _literal_pattern = None


def _mask_pair(match: re.Match[str]) -> str:
    return f"{match.group(1)}={MASK}" if secret_name(match.group(1)) else match.group(0)


def _mask_quoted(match: re.Match[str]) -> str:
    quote, name, colon, vquote, value = match.groups()
    if not value or not secret_name(name):
        return match.group(0)
    return f"{quote}{name}{quote}{colon}{vquote}{MASK}{vquote}"


def redact(text: str) -> str:
    """`text` with every secret value replaced by [redacted]."""
    if not text:
        return text
    literals = _literal_pattern
    if literals is not None:
        text = literals.sub(MASK, text)
    # Each pattern runs only where its cue is in the text: most lines hold none, and the cues
    # cost a substring search where a pattern costs a match attempt at every character.
    lower = text.lower()
    if any(cue in lower for cue in _HEADER_CUES):
        text = _HEADER.sub(lambda m: m.group(1) + MASK, text)
    if "bearer" in lower:
        text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
    if "@" in text and "://" in text:
        text = _USERINFO.sub(lambda m: m.group(1) + MASK + "@", text)
    if "=" in text:
        text = _PAIR.sub(_mask_pair, text)
    if ":" in text and ('"' in text or "'" in text):
        text = _QUOTED_PAIR.sub(_mask_quoted, text)
    if "/hooks/" in text:
        text = _HOOK.sub(lambda m: m.group(1) + MASK, text)
    return text


def redact_value(value: Any) -> Any:
    """A JSON-like value with every string in it redacted (keys kept: they name, not hold)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_value(v) for v in value)
    return value
