"""A tenant's connections to its outside systems, set up by operators: create, edit, enable or
disable, delete, and test with one cheap call. The console, the REST API and the CLI all call
these, so they refuse the same input with the same messages, every wrong field at once, and
nothing is written on a refusal.

The secret fields (`key`, `secret`, `refresh_token`, `webhook_key`) are write-only: they are
encrypted at rest by their columns, an edit that leaves one empty keeps what is stored, and no
answer carries more of them than `mask` shows. What each kind reads:

    gong        base_url, key (access key), secret (access key secret), webhook_key
    salesforce  base_url (login URL), key (client id), secret (client secret), refresh_token,
                webhook_key, organization_id
    llm         provider (openai, anthropic, rules, demo), base_url, secret (API key), model, service
    dataforseo  base_url, key (API login), secret (API password)
    zenrows     base_url, secret (API key)

and every kind takes `options` (the rate limit, the pull's look-back, `reconcile`) and `enabled`.
An edit names the version it was shown (`connection_version`); a row saved since is refused with
ConnectionChanged, so a tab left open cannot undo another's edit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from ingest.engine import lookup_hash, redact
from ingest.pipelines.cursors import LOOKBACK_OPTION, lookback_minutes_check
from ingest.pipelines.errors import (
    ConnectionChanged,
    ConnectionExists,
    ConnectionNotFound,
    InvalidConnection,
)
from ingest.pipelines.models import Connection, ConnectionKind
from ingest.sources.outbound import LIMIT_OPTION, limit_parse
from ingest.sources.probes import ProbeTarget, probe
from ingest.triggers.field_checks import UNSET, tenant_problem

SECRET_FIELDS = ("key", "secret", "refresh_token", "webhook_key")
OPTION_FIELDS = ("provider", "model", "service", "organization_id")  # kept in `options`, typed apart
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    ConnectionKind.GONG: ("base_url", "key", "secret", "webhook_key"),
    ConnectionKind.SALESFORCE: ("base_url", "key", "secret", "refresh_token", "webhook_key", "organization_id"),
    ConnectionKind.LLM: ("provider", "base_url", "secret", "model", "service"),
    ConnectionKind.DATAFORSEO: ("base_url", "key", "secret"),
    ConnectionKind.ZENROWS: ("base_url", "secret"),
}
COMMON_FIELDS = ("options", "enabled")
REQUIRED: dict[str, tuple[str, ...]] = {
    ConnectionKind.GONG: ("key", "secret"),
    ConnectionKind.SALESFORCE: ("key", "secret"),
    ConnectionKind.LLM: (),
    ConnectionKind.DATAFORSEO: ("key", "secret"),
    ConnectionKind.ZENROWS: ("secret",),
}
PROVIDERS = ("openai", "anthropic", "rules", "demo")
EVERY_FIELD = tuple(dict.fromkeys(f for fields in KIND_FIELDS.values() for f in fields)) + COMMON_FIELDS
SECRET_MAX = 4000
TEXT_MAX = 200
URL_MAX = 300
# The same rules as the API's schema states them (dashboard/api/connections.py), so a body the
# schema allows is one these accept.
# `+|` rather than `*`: a schema generator folding a maxLength into `*` would compile a huge repetition.
TEXT_PATTERN = r"^(?:[^\x00-\x1f\x7f]+|)$"
URL_PATTERN = r"^(?:https?://[^\s/?#\x00-\x1f\x7f]+(?:[/?#][^\s\x00-\x1f\x7f]*)?)?$"
RESERVED_OPTIONS = (*OPTION_FIELDS, "refresh_token")
_URL = re.compile(URL_PATTERN)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_WHOLE_OPTIONS = (LOOKBACK_OPTION,)
# Cleared when the credentials or the login URL change: a token issued to the old ones is no use.
_TOKEN_RESET = {"access_token": "", "access_token_expires_at": None, "instance_url": ""}


def connection_version(row: Connection) -> str:
    """The version an edit names: the row's last save, in microseconds (opaque to clients)."""
    return str(int(row.updated_at.timestamp() * 1_000_000))


def connection_audit_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """What an audit entry keeps of a connection's fields: the settings, and only the names of the
    secrets that were set (never their values)."""
    kept = {k: v for k, v in fields.items() if k not in SECRET_FIELDS}
    changed = sorted(k for k in SECRET_FIELDS if fields.get(k))
    return {**kept, "secrets_set": changed} if changed else kept


def _text_problem(value: Any, *, most: int, what: str) -> str | None:
    if not isinstance(value, str) or len(value) > most or _CONTROL.search(value):
        return f"{what} is text of at most {most} characters, without control characters"
    return None


def _whole(value: Any) -> Any:
    """5.0 as 5 (JSON Schema's integers include it); anything else as it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def options_normalized(value: Any) -> Any:
    """The options with their whole numbers as ints (the rate limit's burst, the look-back), as
    the pulls and the rate limits read them."""
    if not isinstance(value, dict):
        return value
    found = {k: _whole(v) if k in _WHOLE_OPTIONS else v for k, v in value.items()}
    if isinstance(found.get(LIMIT_OPTION), dict) and "burst" in found[LIMIT_OPTION]:
        found[LIMIT_OPTION] = {**found[LIMIT_OPTION], "burst": _whole(found[LIMIT_OPTION]["burst"])}
    return found


def _options_problem(value: Any) -> str | None:
    if not isinstance(value, dict):
        return 'options are a JSON object, e.g. {"reconcile": false} or {"rate_limit": {"per_second": 3, "burst": 1}}'
    reserved = sorted(set(value) & set(RESERVED_OPTIONS))
    if reserved:
        return f"set {', '.join(reserved)} in their own field{'s' if len(reserved) > 1 else ''}, not in options"
    value = options_normalized(value)
    try:
        if LIMIT_OPTION in value:
            limit_parse(value[LIMIT_OPTION], what=LIMIT_OPTION)
        if LOOKBACK_OPTION in value:
            lookback_minutes_check(value[LOOKBACK_OPTION], what=LOOKBACK_OPTION)
    except (TypeError, ValueError) as error:
        return str(error)
    if "reconcile" in value and not isinstance(value["reconcile"], bool):
        return "reconcile is true or false (false: no scheduled pulls of this connection)"
    return None


def _field_problem(name: str, value: Any) -> str | None:
    if name == "enabled":
        return None if isinstance(value, bool) else "true or false"
    if name == "options":
        return _options_problem(value)
    if name == "provider":
        return None if value in PROVIDERS else f"the provider is one of {', '.join(PROVIDERS)}; got {str(value)[:40]!r}"
    if name == "base_url":
        if problem := _text_problem(value, most=URL_MAX, what="the base URL"):
            return problem
        return (
            None
            if _URL.match(value)
            else (
                f"the base URL is an http:// or https:// address such as https://api.gong.io, or empty for the "
                f"provider's own; got {value[:60]!r}"
            )
        )
    most = SECRET_MAX if name in SECRET_FIELDS else TEXT_MAX
    return _text_problem(value, most=most, what=name.replace("_", " "))


def connection_problems(
    fields: dict[str, Any], *, kind: Any, tenant: Any = UNSET, stored: dict[str, Any] | None = None
) -> dict[str, str]:
    """What is wrong with a connection's fields, by field name (empty when nothing is). Pure.

    `stored`: the row's current values, for an edit (an empty secret keeps the stored one, so a
    required secret is missing only when neither is set)."""
    problems: dict[str, str] = {}
    if tenant is not UNSET and (problem := tenant_problem(tenant)):
        problems["tenant"] = problem
    if kind not in KIND_FIELDS:
        problems["kind"] = f"the kind is one of {', '.join(KIND_FIELDS)}; got {str(kind)[:40]!r}"
        return problems
    allowed = KIND_FIELDS[kind] + COMMON_FIELDS
    for name, value in fields.items():
        if name not in EVERY_FIELD:
            continue
        if name not in allowed:
            problems[name] = f"a {kind} connection takes no {name.replace('_', ' ')}; it takes {', '.join(allowed)}"
        elif problem := _field_problem(name, value):
            problems[name] = problem
    unknown = sorted(set(fields) - set(EVERY_FIELD))
    if unknown:
        problems["__all__"] = f"connection fields {unknown} are unknown; use {list(allowed)}"
    merged = {**(stored or {}), **{k: v for k, v in fields.items() if not (k in SECRET_FIELDS and v == "")}}
    required = REQUIRED[kind] + (("secret",) if merged.get("provider") == "anthropic" else ())
    for name in required:
        if name not in problems and not merged.get(name):
            problems[name] = f"a {kind} connection needs its {name.replace('_', ' ')}"
    return problems


def _stored(row: Connection) -> dict[str, Any]:
    options = dict(row.options or {})
    values: dict[str, Any] = {
        "base_url": row.base_url,
        "key": row.key,
        "secret": row.secret,
        "refresh_token": row.refresh_token,
        "webhook_key": row.webhook_key,
        "enabled": row.enabled,
    }
    values |= {name: str(options.get(name, "")) for name in OPTION_FIELDS}
    values["options"] = {k: v for k, v in options.items() if k not in OPTION_FIELDS}
    return values


def _apply(row: Connection, fields: dict[str, Any]) -> None:
    """Write the checked `fields` on `row` (empty secrets kept), options and typed options merged."""
    credentials_before = (row.base_url, row.key, row.secret, row.refresh_token)
    options = dict(row.options or {})
    if "options" in fields:
        options = {**{k: v for k, v in options.items() if k in OPTION_FIELDS}, **options_normalized(fields["options"])}
    for name, value in fields.items():
        if name in SECRET_FIELDS:
            if value:
                setattr(row, name, value)
        elif name in OPTION_FIELDS:
            if value:
                options[name] = value
            else:
                options.pop(name, None)
        elif name in ("base_url", "enabled"):
            setattr(row, name, value)
    row.options = options
    row.webhook_key_hash = lookup_hash(row.webhook_key) if row.webhook_key else ""
    if (row.base_url, row.key, row.secret, row.refresh_token) != credentials_before:
        for name, value in _TOKEN_RESET.items():
            setattr(row, name, value)


def connection_create(*, tenant: Any, kind: Any, **fields: Any) -> Connection:
    """A tenant's new connection of `kind`. InvalidConnection names every wrong field at once;
    ConnectionExists when the tenant already has one of that kind and nothing else is wrong."""
    problems = connection_problems(fields, kind=kind, tenant=tenant)
    if not problems and Connection.objects.filter(tenant=tenant, kind=kind).exists():
        raise ConnectionExists(problems={"kind": f"tenant {tenant!r} already has a {kind} connection; edit that one"})
    if problems:
        raise InvalidConnection(problems=problems)
    row = Connection(tenant=tenant, kind=kind, updated_at=timezone.now())
    _apply(row, {"enabled": True, **fields})
    row.save()
    return row


def _locked(tenant: str, kind: str, version: str | None) -> Connection:
    row = Connection.objects.select_for_update().filter(tenant=tenant, kind=kind).first()
    if row is None:
        raise ConnectionNotFound(f"tenant {tenant[:100]!r} has no {kind[:40]} connection")
    if version is not None and version != connection_version(row):
        at = row.updated_at.astimezone(UTC)
        raise ConnectionChanged(
            f"the {kind} connection of {tenant} changed since you loaded it (saved at {at:%H:%M:%S} UTC). "
            "Nothing was done; load it again and decide on what it is now."
        )
    return row


def connection_update(*, tenant: str, kind: str, version: str | None = None, **fields: Any) -> Connection:
    """Change a connection's settings (not its tenant or kind). An empty secret keeps the stored
    one. Nothing changes on InvalidConnection, ConnectionNotFound or ConnectionChanged."""
    with transaction.atomic():
        row = _locked(tenant, kind, version)
        problems = connection_problems(fields, kind=kind, stored=_stored(row))
        if problems:
            raise InvalidConnection(problems=problems)
        _apply(row, fields)
        row.updated_at = timezone.now()
        row.save()
    return row


def connection_set_enabled(*, tenant: str, kind: str, enabled: bool, version: str | None = None) -> Connection:
    """Enable or disable a connection: a disabled one is as if absent (the environment's settings
    apply, its webhooks answer 404, its pulls stop)."""
    return connection_update(tenant=tenant, kind=kind, version=version, enabled=enabled)


def connection_delete(*, tenant: str, kind: str, version: str | None = None) -> Connection:
    """Delete a connection and its pull cursor; what it started stays. The returned copy holds
    no secret."""
    with transaction.atomic():
        row = _locked(tenant, kind, version)
        gone = Connection(
            pk=row.pk,
            tenant=row.tenant,
            kind=row.kind,
            base_url=row.base_url,
            enabled=row.enabled,
            updated_at=row.updated_at,
        )
        row.delete()
    return gone


@dataclass(frozen=True)
class TestOutcome:
    ok: bool
    message: str
    tested_at: datetime


def _said(error: BaseException, secrets: list[str]) -> str:
    """An error as `Class: message`, without any of the connection's secrets and redacted as logs are."""
    text = str(error)
    for value in sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True):
        text = text.replace(value, "••••")
    return f"{type(error).__name__}: {redact(text)}"[:1000]


def connection_test(*, tenant: str, kind: str, now: datetime) -> TestOutcome:
    """Make the kind's one cheap call with the stored settings (ingest.sources.probes) and record
    when and how it went on the row, without moving its version. Any failure is an outcome, not
    an error: its class and message, with no secret in it. ConnectionNotFound without a row."""
    row = Connection.objects.filter(tenant=tenant, kind=kind).first()
    if row is None:
        raise ConnectionNotFound(f"tenant {tenant[:100]!r} has no {kind[:40]} connection")
    target = ProbeTarget(
        kind=row.kind,
        base_url=row.base_url,
        key=row.key,
        secret=row.secret,
        refresh_token=row.refresh_token,
        options=dict(row.options or {}),
    )
    try:
        outcome = TestOutcome(True, probe(target)[:1000], now)
    except Exception as error:  # every failure is the operator's answer, whatever raised it
        outcome = TestOutcome(False, _said(error, [row.key, row.secret, row.refresh_token, row.webhook_key]), now)
    Connection.objects.filter(pk=row.pk).update(
        last_tested_at=now, last_test_ok=outcome.ok, last_test_message=outcome.message
    )
    return outcome
