"""Secrets at rest: Fernet encryption under the keys of RUNLEDGER_SECRET_KEYS.

One module for every encrypted value, so the pipelines' connections, the triggers' HMAC secrets
and the engine's sensitive step results share one key list and one rotation (`manage.py
secrets_rotate`). It sits in the engine because the engine is the bottom of the import ladder
and must itself encrypt sensitive step results and params.

- Text columns hold `enc:` + a Fernet token (`EncryptedTextField` seals on save and opens on
  load). The empty string stays empty: "no secret" is not a secret.
- JSON values hold `{"$sealed": "enc:…"}` (`seal_value`): sensitive step results and params.
- A value looked up by equality (a webhook key in a URL) is stored as its HMAC-SHA256 under a key
  derived from each Fernet key (`lookup_hashes`) beside its encrypted copy.

The first key encrypts, every key decrypts: rotate by putting a new key first, running
`secrets_rotate`, then dropping the old one. There is no plain-text fallback: a missing key is an
`ImproperlyConfigured` error naming the variable.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
from typing import Any
from urllib.parse import urlsplit

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models

from ingest.engine.redaction import remember

PREFIX = "enc:"
SEALED = "$sealed"
REDACTED = "redacted"
KEYS_VARIABLE = "RUNLEDGER_SECRET_KEYS"
# A webhook URL's path shorter than this (/hook, /alerts) is not taken for a secret.
SECRET_PATH_LENGTH = 16


class SecretsError(Exception):
    """A secret could not be read."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__doc__)


class SecretUnreadable(SecretsError):
    """A stored secret is not a token any configured key opens."""


class SecretKeysMissing(ImproperlyConfigured):
    """RUNLEDGER_SECRET_KEYS is not set: secrets cannot be stored or read without a key."""


_cache: dict[tuple[str, ...], tuple[MultiFernet, tuple[bytes, ...]]] = {}


def configured_keys() -> tuple[str, ...]:
    raw = getattr(settings, KEYS_VARIABLE, ()) or ()
    if isinstance(raw, str):
        raw = raw.split(",")
    return tuple(k.strip() for k in raw if k and k.strip())


def _cipher() -> tuple[MultiFernet, tuple[bytes, ...]]:
    keys = configured_keys()
    if not keys:
        raise SecretKeysMissing(
            f"{KEYS_VARIABLE} is not set: give it one or more comma-separated Fernet keys (the first "
            "encrypts, all decrypt); make one with `python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'`. `manage.py up` creates a local key file for the "
            "embedded default."
        )
    if keys not in _cache:
        try:
            fernets = [Fernet(k.encode()) for k in keys]
        except ValueError as error:
            raise ImproperlyConfigured(
                f"{KEYS_VARIABLE} holds a value that is not a Fernet key (32 url-safe base64-encoded bytes): {error}"
            ) from None
        # The lookup key is derived, not the Fernet key itself: a leaked hash says nothing about it.
        lookup = tuple(hashlib.sha256(b"runledger-lookup:" + base64.urlsafe_b64decode(k)).digest() for k in keys)
        _cache[keys] = (MultiFernet(fernets), lookup)
    return _cache[keys]


def generate_key() -> str:
    return Fernet.generate_key().decode()


def is_sealed(text: object) -> bool:
    return isinstance(text, str) and text.startswith(PREFIX)


def seal(text: str) -> str:
    """`enc:` + a Fernet token of `text` under the first key; "" stays ""."""
    if not text:
        return ""
    return PREFIX + _cipher()[0].encrypt(text.encode()).decode()


def unseal(text: str) -> str:
    """The clear text of a sealed string; "" stays "". Raises SecretUnreadable otherwise."""
    if not text:
        return ""
    if not is_sealed(text):
        raise SecretUnreadable(
            "a secret column holds plain text; run the migrations (they encrypt "
            "existing rows) — plain text is never used as a secret"
        )
    return _opened(text, configured_keys())


@functools.lru_cache(maxsize=256)
def _opened(text: str, keys: tuple[str, ...]) -> str:
    # A token's clear text never changes under the same keys: each signed ingress request and
    # webhook read decrypts its credential, and Fernet's check and AES were a measurable share of
    # the request. A rotated or re-encrypted secret is a new token (a miss); a failure is not kept.
    try:
        return _cipher()[0].decrypt(text[len(PREFIX) :].encode()).decode()
    except InvalidToken:
        raise SecretUnreadable(
            f"no key in {KEYS_VARIABLE} opens a stored secret: was a key dropped "
            "before `manage.py secrets_rotate` re-encrypted everything?"
        ) from None


def reseal(text: str) -> str:
    """The same secret under the first key (rotation); plain or empty text is left as it is."""
    if not is_sealed(text):
        return text
    try:
        return PREFIX + _cipher()[0].rotate(text[len(PREFIX) :].encode()).decode()
    except InvalidToken:
        raise SecretUnreadable(
            f"no key in {KEYS_VARIABLE} opens a stored secret; put the key it "
            "was written with back in the list and rotate again"
        ) from None


def seal_value(value: Any) -> dict[str, str]:
    """A JSON value as `{"$sealed": "enc:…"}`, for JSON columns."""
    return {SEALED: seal(json.dumps(value))}


def is_sealed_value(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and is_sealed(value.get(SEALED))


def unseal_value(value: Any) -> Any:
    """The JSON value a `seal_value` holds; any other value as it is."""
    if not is_sealed_value(value):
        return value
    return json.loads(unseal(value[SEALED]))


def seal_keys(params: dict[str, Any], names: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """`params` with the values of `names` sealed (a workflow's `sensitive_params`)."""
    return {k: seal_value(v) if k in names and not is_sealed_value(v) else v for k, v in params.items()}


def unseal_keys(params: Any) -> Any:
    """The params a workflow's `run` sees: every sealed top-level value opened."""
    if not isinstance(params, dict) or not any(is_sealed_value(v) for v in params.values()):
        return params
    return {k: unseal_value(v) for k, v in params.items()}


def reseal_value(value: Any) -> Any:
    """Every sealed value inside a JSON document re-encrypted under the first key."""
    if is_sealed_value(value):
        return {SEALED: reseal(value[SEALED])}
    if isinstance(value, dict):
        return {k: reseal_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [reseal_value(v) for v in value]
    return value


def public_value(value: Any) -> Any:
    """A JSON document for display: every sealed value shown as "redacted"."""
    if is_sealed_value(value):
        return REDACTED
    if isinstance(value, dict):
        return {k: public_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [public_value(v) for v in value]
    return value


def public_text(text: str) -> str:
    """Text for display: a sealed string shown as "redacted"."""
    return REDACTED if is_sealed(text) else text


def lookup_hashes(value: str) -> list[str]:
    """HMAC-SHA256 of `value` under every key, the first key's first: rows store the first, a
    lookup matches any, so lookups keep working between adding a key and rotating."""
    return [hmac.new(k, value.encode(), hashlib.sha256).hexdigest() for k in _cipher()[1]]


def lookup_hash(value: str) -> str:
    return lookup_hashes(value)[0] if value else ""


def mask(value: str) -> str:
    """What a form or an answer may show of a secret: its last 4 characters (none of a short one)."""
    if not value:
        return ""
    return "••••" + (value[-4:] if len(value) >= 12 else "")


class EncryptedTextField(models.TextField):  # type: ignore[type-arg]
    """A text column holding `enc:` + a Fernet token; the model attribute is the clear text."""

    description = "Text encrypted at rest (RUNLEDGER_SECRET_KEYS)"

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str | None:
        return None if value is None else known(unseal(value))

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        return value if value is None else seal(known(str(value)))


def known(clear: str) -> str:
    """`clear` (a secret column's text) as it is, after telling the redaction its values: the
    text itself, or each string of a JSON object (a channel's keys and password). A URL among
    them is told by its path (a Slack-style webhook URL's secret is its path, which a connection
    error quotes alone), when that is long enough to be one; its host is no secret."""
    values: list[str] = [clear]
    if clear.startswith("{"):
        try:
            opened = json.loads(clear)
        except ValueError:
            opened = None
        if isinstance(opened, dict):
            values = [v for v in opened.values() if isinstance(v, str)]
    for value in list(values):
        if value.startswith(("http://", "https://")):
            values.remove(value)
            parts = urlsplit(value)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            if len(path) >= SECRET_PATH_LENGTH:
                values.append(path)
    remember(*values)
    return clear
