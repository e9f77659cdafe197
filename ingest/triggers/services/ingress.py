"""HTTP ingress: authenticate, verify, rate-limit, deduplicate, start. Views only translate HTTP."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction

from ingest.engine import Lead
from ingest.engine.models import FINISHED_STATUSES
from ingest.engine.services import instances as engine_services
from ingest.engine.services.instances import CreateOptions
from ingest.triggers import coalesce, limits, signing
from ingest.triggers import sql as trigger_sql
from ingest.triggers.errors import (
    IdempotencyConflict,
    InvalidIdempotencyKey,
    InvalidPayload,
    NotAuthenticated,
    RateLimited,
    ReplayedRequest,
    RouteChanged,
    RouteDisabled,
    RouteNotFound,
    TriggerError,
)
from ingest.triggers.models import IdempotencyKey, IngressSecret, Route, SeenSignature
from ingest.triggers.selectors import Outcome
from ingest.triggers.services.coalesce import Coalesced, coalesce_add
from ingest.triggers.services.credentials import credential_secret
from ingest.triggers.services.ratelimits import rate_limits_take

_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")
_ID_SAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class Triggered:
    instance_id: str
    created: bool  # False: an earlier request with the same idempotency key created it
    route: Route
    # The route debounces or batches: the request joined this window (its instance is queued
    # until the window closes).
    coalesced: Coalesced | None = None
    # Not created: the instance's outcome, read with the key (None: not read, or it is gone).
    outcome: Outcome | None = None
    # The caller's `also` query's value, read in the creating statement (`also_read` False: not
    # read, the caller asks itself).
    also: Any = None
    also_read: bool = False


@dataclass(frozen=True)
class _Start:
    """A checked request's start: what every way of starting it (with or without an
    Idempotency-Key, in one statement or in the ORM's transaction) needs."""

    route: Route
    payload: dict[str, Any]
    now: datetime
    actor: str
    # The digests the route's lookup found (PostgreSQL only, triggers/sql.py); None: no
    # one-statement start.
    current: trigger_sql.Current | None
    also: str | None


class _Stale(Exception):
    """The route or credential a request was checked against changed before its statement."""


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


def _instance_id(route: Route) -> str:
    base = _ID_SAFE.sub("-", route.name)[:60].lstrip("-") or "route"
    return f"{base}-{uuid.uuid4().hex[:20]}"


def _start(
    route: Route,
    payload: dict[str, Any],
    *,
    actor: str,
    now: datetime,
    first: Callable[[str], object],
    instance_id: str | None = None,
) -> tuple[str, Coalesced | None]:
    """Start the route's instance, or add the request to its debounce or batch window.

    `first(instance_id)` writes the caller's own row (the remembered signature or the
    idempotency key) in the same transaction: both exist or neither does.
    """
    config = coalesce.parse(route.coalesce)
    if config is not None:
        with transaction.atomic():
            joined = coalesce_add(
                source=f"route:{route.name}",
                config=config,
                workflow=route.workflow,
                tenant=route.tenant,
                payload=payload,
                now=now,
                priority=route.priority,
                actor=actor,
            )
            first(joined.instance_id)
        return joined.instance_id, joined
    instance_id = instance_id or _instance_id(route)
    options = _instance_options(route, payload, instance_id, actor)
    engine_services.instance_create(workflow=route.workflow, first=lambda: first(instance_id), **options)
    return instance_id, None


def _instance_options(route: Route, payload: dict[str, Any], instance_id: str, actor: str) -> CreateOptions:
    """The instance a route's request starts: the route's tenant and priority, the request's body."""
    return CreateOptions(id=instance_id, params=payload, tenant=route.tenant, priority=route.priority, actor=actor)


def _remember(seen: SeenSignature) -> Callable[[str], object]:
    def save(instance_id: str) -> None:
        seen.instance_id = instance_id
        seen.save(force_insert=True)

    return save


def _keep(row: IdempotencyKey) -> Callable[[str], object]:
    def save(instance_id: str) -> None:
        row.instance_id = instance_id
        row.save(force_insert=True)

    return save


def _start_unreplayed(start: _Start, *, seen: SeenSignature) -> Triggered:
    """Start the instance and remember the request's signature in one transaction.

    Without an Idempotency-Key the signature is the request's identity: the same bytes sent
    again inside the window hit the primary key (on PostgreSQL a concurrent twin blocks on it
    until the first commits) and are refused, naming the instance the first one started.
    """
    route, payload, actor, current = start.route, start.payload, start.actor, start.current
    if current is not None and _one_statement(route):
        # In one statement: the signature's row leads, the instance follows.
        for _ in range(3):
            seen.instance_id = _instance_id(route)
            lead = trigger_sql.seen_signature_lead(seen, current=current, also=start.also)
            probe = _create_behind(lead, route, payload, instance_id=seen.instance_id, actor=actor)
            if probe is None:
                continue  # the instance id is taken (nothing was written): another one
            if isinstance(probe, Triggered):
                return probe
            first = probe.rest[0] or trigger_sql.seen_signature_read(digest=seen.digest)
            if first is not None:
                raise _replayed(first)
            # purged under us: be first again
        raise ReplayedRequest("this signed request is contended by an identical one; retry it")
    for _ in range(3):
        try:
            seen.instance_id, joined = _start(route, payload, actor=actor, now=start.now, first=_remember(seen))
            return Triggered(seen.instance_id, True, route, joined)
        except IntegrityError:
            first = SeenSignature.objects.filter(pk=seen.digest).first()
            if first is None:
                continue  # purged under us: be first again
            raise _replayed(first.instance_id) from None
    raise ReplayedRequest("this signed request is contended by an identical one; retry it")


def _seen(route: Route, *, timestamp: str | None, signature: str | None) -> SeenSignature:
    stamp = (timestamp or "").strip()
    digest = signing.body_hash(f"{stamp}.{(signature or '').strip()}".encode("ascii", "replace"))
    expires = datetime.fromtimestamp(int(stamp) + signing.WINDOW_SECONDS, tz=UTC)
    return SeenSignature(digest=digest, tenant=route.tenant, route=route.name, expires_at=expires)


def _one_statement(route: Route) -> bool:
    """Whether the request's own row and the instance go in one statement, given the digests the
    lookup found (`current`, which only PostgreSQL's lookup returns, triggers/sql.py): a route
    that neither debounces nor batches. One round trip where the ORM took five."""
    return not route.coalesce


def _replayed(instance_id: str) -> ReplayedRequest:
    return ReplayedRequest(
        f"this exact signed request was already accepted (instance {instance_id}); "
        "a replay starts nothing — sign a new request with the current timestamp, or send "
        "an Idempotency-Key to retry safely",
        instance_id=instance_id,
    )


def _create_behind(
    lead: Lead, route: Route, payload: dict[str, Any], *, instance_id: str, actor: str
) -> Triggered | trigger_sql.Probed | None:
    """The route's instance behind `lead`, in one statement: Triggered when it was created; the
    probe's reading when the lead wrote nothing (a replay or a taken key); None when the instance
    id is taken (nothing was written: draw another). _Stale when the route or its credential
    changed since the request was checked: a replay is not answered either, the credential may
    be revoked."""
    try:
        created, row = engine_services.instance_create_behind(
            lead=lead, workflow=route.workflow, **_instance_options(route, payload, instance_id, actor)
        )
    except IntegrityError:
        return None
    probe = trigger_sql.probed(row)
    if created:
        return Triggered(instance_id, True, route, also=probe.also, also_read=True)
    if not probe.current:
        raise _Stale
    return probe


def _start_once_at_once(start: _Start, *, key: str, digest: str, current: trigger_sql.Current) -> Triggered:
    """`_start_once` in one statement: the key's row leads, the instance and its history follow
    only if the key was new (or expired); a replay reads the first request's key and its
    instance's outcome in the same statement."""
    route, now = start.route, start.now
    expires = now + timedelta(seconds=route.idempotency_ttl_seconds)
    for _ in range(5):
        instance_id = _instance_id(route)
        lead = trigger_sql.idempotency_key_lead(
            tenant=route.tenant,
            route=route.name,
            key=key,
            digest=digest,
            instance_id=instance_id,
            now=now,
            expires_at=expires,
            current=current,
            also=start.also,
        )
        probe = _create_behind(lead, route, start.payload, instance_id=instance_id, actor=start.actor)
        if probe is None:
            continue  # the instance id is taken (nothing was written): another one
        if isinstance(probe, Triggered):
            return probe
        kept = trigger_sql.idempotency_key_kept(probe.rest) or trigger_sql.idempotency_key_read(
            tenant=route.tenant, route=route.name, key=key
        )
        if kept is None or kept.expires_at <= now:
            continue  # deleted or expired under us: try to be first again
        if kept.body_sha256 != digest:
            raise _conflict(route, key, kept.instance_id)
        outcome = None
        if kept.status is not None:
            error = (
                {"name": kept.error_name, "message": kept.error_message}
                if kept.error_name or kept.error_message
                else None
            )
            outcome = Outcome(kept.instance_id, kept.status, kept.output, error, kept.status in FINISHED_STATUSES)
        return Triggered(kept.instance_id, False, route, outcome=outcome)
    raise IdempotencyConflict(f"Idempotency-Key {key!r} on route {route.name!r} is contended; retry the request")


def _conflict(route: Route, key: str, instance_id: str) -> IdempotencyConflict:
    return IdempotencyConflict(
        f"Idempotency-Key {key!r} was used on route {route.name!r} with a different "
        f"body (instance {instance_id}); use a new key for a new request"
    )


def _start_once(start: _Start, *, key: str) -> Triggered:
    """The first request with `key` starts the instance; the rest get its id.

    The key row and the instance are inserted in one transaction: on PostgreSQL a concurrent
    duplicate blocks on the unique index until the winner commits, then gets IntegrityError and
    reads the winner's row, so exactly one instance exists whatever the interleaving.
    """
    route, payload, now = start.route, start.payload, start.now
    digest = signing.body_hash(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode())
    if start.current is not None and _one_statement(route):
        return _start_once_at_once(start, key=key, digest=digest, current=start.current)
    for _ in range(5):
        instance_id = _instance_id(route)
        row = IdempotencyKey(
            tenant=route.tenant,
            route=route.name,
            key=key,
            body_sha256=digest,
            instance_id=instance_id,
            created_at=now,
            expires_at=now + timedelta(seconds=route.idempotency_ttl_seconds),
        )
        try:
            # The key row first, in the instance's own transaction (no savepoint: two round
            # trips fewer), so a duplicate key stops before the instance is inserted.
            instance_id, joined = _start(
                route, payload, actor=start.actor, now=now, first=_keep(row), instance_id=instance_id
            )
            return Triggered(instance_id, True, route, joined)
        except IntegrityError:
            existing = IdempotencyKey.objects.filter(tenant=route.tenant, route=route.name, key=key).first()
            if existing is None:
                continue  # an expired row was deleted under us: try to be first again
            if existing.expires_at <= now:
                IdempotencyKey.objects.filter(pk=existing.pk, expires_at__lte=now).delete()
                continue
            if existing.body_sha256 != digest:
                raise _conflict(route, key, existing.instance_id) from None
            return Triggered(existing.instance_id, False, route)
    raise IdempotencyConflict(f"Idempotency-Key {key!r} on route {route.name!r} is contended; retry the request")


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
        except _Stale:
            _KEPT.pop((route, token_hash), None)
            continue
        except TriggerError:
            if checked is kept:
                _KEPT.pop((route, token_hash), None)  # a refusal is given from fresh rows only
                continue
            raise
        # A debouncing or batching route joins its window without the guarded statement: kept
        # only if its creating statement checks it.
        if checked.current is not None and checked is not kept and _one_statement(checked.route):
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
    start = _Start(found, payload, now, actor, checked.current, also)
    if idempotency_key is None:
        return _start_unreplayed(start, seen=_seen(found, timestamp=timestamp, signature=signature))
    return _start_once(start, key=idempotency_key)


def idempotency_keys_purge(*, now: datetime) -> int:
    """Delete expired idempotency keys and remembered signatures (the scheduler calls this
    every 5 minutes); expired rows are also replaced on use."""
    deleted, _ = IdempotencyKey.objects.filter(expires_at__lte=now).delete()
    signatures, _ = SeenSignature.objects.filter(expires_at__lte=now).delete()
    return deleted + signatures
