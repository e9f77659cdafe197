"""HTTP ingress: authenticate, verify, rate-limit, deduplicate, start. Views only translate HTTP."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from ingest.triggers import coalesce, limits, signing
from ingest.triggers import sql as trigger_sql
from ingest.triggers.errors import (
    InvalidIdempotencyKey,
    InvalidPayload,
    NotAuthenticated,
    RateLimited,
    RouteChanged,
    RouteDisabled,
    RouteNotFound,
    TriggerError,
)
from ingest.triggers.models import IdempotencyKey, IngressSecret, Route, SeenSignature
from ingest.triggers.services.credentials import credential_secret
from ingest.triggers.services.ratelimits import rate_limits_take
from ingest.triggers.services.starts import (
    Stale,
    Start,
    Triggered,
    one_statement,
    seen_signature,
    start_once,
    start_unreplayed,
)

_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")


@dataclass(frozen=True)
class _Checked:
    """A route and the caller's credential as a lookup found them (`current`: what the creating
    statement checks they still are; None on SQLite)."""

    route: Route
    credential: IngressSecret
    current: trigger_sql.Current | None


# (route name, token hash) → what the last lookup found, per process: a request whose route and
# credential are here takes no lookup. Nothing here is trusted on its own: the creating statement
# writes nothing unless both rows are unchanged, and then the request is checked afresh, so a
# rotated, disabled or deleted credential or route is refused at once, with no expiry window.
_KEPT: dict[tuple[str, str], _Checked] = {}
_KEPT_MOST = 1024


def route_coalesce_set(*, name: str, coalesce_setting: dict[str, Any] | None) -> Route:
    """Set (or, with None or {}, clear) a route's debounce or batch; InvalidCoalesce changes nothing.

    Windows already open keep the setting they opened with until they close."""
    config = coalesce.parse(coalesce_setting)
    with transaction.atomic():
        route = Route.objects.select_for_update().filter(name=name).first()
        if route is None:
            raise RouteNotFound(f"no route is named {name[:100]!r}")
        route.coalesce = coalesce_setting if config is not None and coalesce_setting else {}
        route.save(update_fields=["coalesce", "updated_at"])
    return route


def route_upsert(*, name: str, workflow: str, tenant: str = "default", **fields: Any) -> Route:
    """Define a route in code (the admin edits the same rows)."""
    coalesce.parse(fields.get("coalesce"))
    route, _ = Route.objects.update_or_create(name=name, defaults={"workflow": workflow, "tenant": tenant, **fields})
    return route


def _route_and_credential(name: str, token: str | None, token_hash: str) -> _Checked:
    """The route and the caller's credential (one query), or the error that says which is wrong."""
    found = trigger_sql.route_with_secret(name=name, token_hash=token_hash)
    if found is None:
        raise RouteNotFound(
            f"no route is named {name[:100]!r}; an operator creates routes on the console's routes page (/routes/)"
        )
    route, secret = found.route, found.secret
    if not route.enabled:
        raise RouteDisabled(
            f"route {route.name!r} is disabled; an operator can enable it on its console page (/routes/{route.name}/)"
        )
    if not token:
        raise NotAuthenticated(f"route {route.name!r} needs an ingress token: send Authorization: Bearer <token>")
    if secret is None:
        raise NotAuthenticated(
            f"the ingress token is not valid for route {route.name!r}; use a token issued for its tenant"
        )
    return _Checked(route, secret, found.current)


def parse_payload(body: bytes, *, parsed: Any = None) -> dict[str, Any]:
    """The params in a request body: a JSON object within the input limits, no reserved key.
    `parsed`: the body already parsed within the limits (the input guard's), else None."""
    if not body.strip():
        return {}
    payload = parsed if parsed is not None else limits.json_parse(body, limits=limits.input_limits(), what="the body")
    if not isinstance(payload, dict):
        raise InvalidPayload(
            f"the body is a JSON {type(payload).__name__}; the workflow's params must be a JSON "
            'object, e.g. {"account": "acme"}'
        )
    limits.reserved_params_check(payload)
    return payload


def route_trigger(
    *,
    route: str,
    token: str | None,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    idempotency_key: str | None,
    now: datetime,
    actor: str = "",
    parsed: Any = None,
    also: str | None = None,
) -> Triggered:
    """Start the route's workflow for a signed request, or raise a TriggerError saying why not.

    Checks run cheapest first and nothing is written before they all pass; a request refused for
    its rate limit took no token. `parsed`: the body as the input guard parsed it, if it did.
    `also`: a scalar SELECT the creating statement runs too, on PostgreSQL (%(g_name)s is the
    route's name); its value comes back in `Triggered.also` when `also_read`.

    The route and credential a previous request of this process found are used without a lookup;
    the creating statement checks they are unchanged, and when they are not the request is
    checked again from a fresh lookup (a rate-limited route's token was then taken twice).
    """
    token_hash = signing.token_hash(token) if token else ""
    kept = _KEPT.get((route, token_hash)) if token else None
    for attempt in range(3):
        checked = kept if kept is not None and attempt == 0 else _route_and_credential(route, token, token_hash)
        try:
            triggered = _trigger(
                checked,
                token_hash=token_hash,
                timestamp=timestamp,
                signature=signature,
                body=body,
                idempotency_key=idempotency_key,
                now=now,
                actor=actor,
                parsed=parsed,
                also=also,
            )
        except Stale:
            _KEPT.pop((route, token_hash), None)
            continue
        except TriggerError:
            if checked is kept:
                _KEPT.pop((route, token_hash), None)  # a refusal is given from fresh rows only
                continue
            raise
        # A debouncing or batching route joins its window without the guarded statement: kept
        # only if its creating statement checks it.
        if checked.current is not None and checked is not kept and one_statement(checked.route):
            if len(_KEPT) >= _KEPT_MOST:
                _KEPT.clear()
            _KEPT[(route, token_hash)] = checked
        return triggered
    raise RouteChanged(f"route {route[:100]!r} or its credential changed while the request was handled; retry it")


def _trigger(
    checked: _Checked,
    *,
    token_hash: str,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    idempotency_key: str | None,
    now: datetime,
    actor: str,
    parsed: Any,
    also: str | None,
) -> Triggered:
    found, credential = checked.route, checked.credential
    # The pair the token belongs to: the current one, or the one a rotation replaced while its
    # overlap lasts (checked against `now` here, so a kept credential cannot outlive it).
    signing.verify(
        secrets=[credential_secret(credential, token_hash=token_hash, now=now)],
        timestamp=timestamp,
        signature=signature,
        body=body,
        now=now,
    )
    if idempotency_key is not None and not _KEY.match(idempotency_key):
        raise InvalidIdempotencyKey(
            f"Idempotency-Key {idempotency_key[:40]!r} is invalid; use 1 to 200 printable ASCII characters, e.g. a UUID"
        )
    payload = parse_payload(body, parsed=parsed)
    limits = [(f"ingress:route:{found.name}", found.rate_limit_per_minute)]
    limits.append((f"ingress:tenant:{found.tenant}", credential.rate_limit_per_minute))
    wait = rate_limits_take(limits=[(k, n) for k, n in limits if n], now=now)
    if wait:
        raise RateLimited(
            f"route {found.name!r} (tenant {found.tenant!r}) is over its rate limit; retry after {wait:.1f} s",
            retry_after=wait,
        )
    actor = actor or f"ingress:{credential.tenant}/{credential.name}"
    start = Start(found, payload, now, actor, checked.current, also)
    if idempotency_key is None:
        return start_unreplayed(start, seen=seen_signature(found, timestamp=timestamp, signature=signature))
    return start_once(start, key=idempotency_key)


def idempotency_keys_purge(*, now: datetime) -> int:
    """Delete expired idempotency keys and remembered signatures (the scheduler calls this
    every 5 minutes); expired rows are also replaced on use."""
    deleted, _ = IdempotencyKey.objects.filter(expires_at__lte=now).delete()
    signatures, _ = SeenSignature.objects.filter(expires_at__lte=now).delete()
    return deleted + signatures
