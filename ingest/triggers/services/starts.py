"""How a checked ingress request starts its route's instance: once per Idempotency-Key, or once
per signature without one; on PostgreSQL in one statement behind the request's own row, else in
the ORM's transaction. The checks before (route, credential, signature, limits) are ingress.py's.
"""

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
from ingest.triggers import coalesce, signing
from ingest.triggers import sql as trigger_sql
from ingest.triggers.errors import IdempotencyConflict, ReplayedRequest
from ingest.triggers.models import IdempotencyKey, Route, SeenSignature
from ingest.triggers.selectors import Outcome
from ingest.triggers.services.coalesce import Coalesced, coalesce_add

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
class Start:
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


class Stale(Exception):
    """The route or credential a request was checked against changed before its statement."""


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


def start_unreplayed(start: Start, *, seen: SeenSignature) -> Triggered:
    """Start the instance and remember the request's signature in one transaction.

    Without an Idempotency-Key the signature is the request's identity: the same bytes sent
    again inside the window hit the primary key (on PostgreSQL a concurrent twin blocks on it
    until the first commits) and are refused, naming the instance the first one started.
    """
    route, payload, actor, current = start.route, start.payload, start.actor, start.current
    if current is not None and one_statement(route):
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


def seen_signature(route: Route, *, timestamp: str | None, signature: str | None) -> SeenSignature:
    stamp = (timestamp or "").strip()
    digest = signing.body_hash(f"{stamp}.{(signature or '').strip()}".encode("ascii", "replace"))
    expires = datetime.fromtimestamp(int(stamp) + signing.WINDOW_SECONDS, tz=UTC)
    return SeenSignature(digest=digest, tenant=route.tenant, route=route.name, expires_at=expires)


def one_statement(route: Route) -> bool:
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
    id is taken (nothing was written: draw another). Stale when the route or its credential
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
        raise Stale
    return probe


def _start_once_at_once(start: Start, *, key: str, digest: str, current: trigger_sql.Current) -> Triggered:
    """`start_once` in one statement: the key's row leads, the instance and its history follow
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


def start_once(start: Start, *, key: str) -> Triggered:
    """The first request with `key` starts the instance; the rest get its id.

    The key row and the instance are inserted in one transaction: on PostgreSQL a concurrent
    duplicate blocks on the unique index until the winner commits, then gets IntegrityError and
    reads the winner's row, so exactly one instance exists whatever the interleaving.
    """
    route, payload, now = start.route, start.payload, start.now
    digest = signing.body_hash(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode())
    if start.current is not None and one_statement(route):
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
