"""Every raw SQL query of the triggers app, one typed function each: the ingress lookup of a
route with the caller's credential (both databases), and the ingress writes that share one
statement with the instance they start (PostgreSQL only). The scheduler's leadership lock is the
engine's (`ingest.engine.session_lock_try`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import Field, Model

from ingest.engine import ByVendor, Lead, aware, prepared_row
from ingest.engine.models import Instance
from ingest.triggers.models import IdempotencyKey, IngressSecret, Route, SeenSignature, TokenBucket

Converter = Callable[[Any, Any, Any], Any]


@cache
def _columns(model: type[Model], alias: str) -> tuple[str, list[str], list[tuple[Any, list[Converter]]]]:
    """A model's columns as `alias."column", ...`, their attribute names, and what turns each
    raw value into the field's value (the backend's converters and the field's own, e.g. the
    decryption of an EncryptedTextField): what the ORM applies when it reads the row."""
    fields: Sequence[Field[Any, Any]] = model._meta.concrete_fields
    cols = [field.get_col(alias) for field in fields]
    converters = [(col, [*connection.ops.get_db_converters(col), *col.get_db_converters(connection)]) for col in cols]
    names = ", ".join(f'{alias}."{field.column}"' for field in fields)
    return names, [field.attname for field in fields], converters


def _build(model: type[Model], alias: str, values: Sequence[Any]) -> Any:
    _, attnames, converters = _columns(model, alias)
    converted = []
    for value, (col, funcs) in zip(values, converters, strict=True):
        for func in funcs:
            value = func(value, col, connection)
        converted.append(value)
    return model.from_db(connection.alias, attnames, converted)


@dataclass(frozen=True)
class Current:
    """The route and credential rows as a lookup read them (ids and a digest of each whole row,
    PostgreSQL only): the creating statement writes nothing unless both rows are still exactly
    these, so a caller may keep them between requests (a rotated, disabled, edited or deleted
    route or credential is noticed by the next statement, whatever changed it)."""

    route_id: int
    route_digest: str
    secret_id: int
    secret_digest: str


@dataclass(frozen=True)
class Found:
    route: Route
    secret: IngressSecret | None
    current: Current | None  # None: SQLite, or no credential matched


def route_with_secret(*, name: str, token_hash: str) -> Found | None:
    """The route `name` and the enabled ingress secret of its tenant whose token, or whose
    previous token (a rotation's overlap; the caller checks it has not ended), hashes to
    `token_hash` (None when there is none), in one round trip; None when no route has the name."""
    route_cols, route_names, _ = _columns(Route, "r")
    secret_cols, _, _ = _columns(IngressSecret, "s")
    table = (
        f"{Route._meta.db_table} r LEFT JOIN {IngressSecret._meta.db_table} s"
        " ON (s.token_hash = %s OR s.previous_token_hash = %s)"
    )
    where = " AND s.tenant = r.tenant AND s.enabled WHERE r.name = %s"
    found = _route_row()(f"{route_cols}, {secret_cols}", f"{table}{where}", [token_hash, token_hash, name])
    if found is None:
        return None
    row, digests = found
    split = len(route_names)
    route = _build(Route, "r", row[:split])
    secret = _build(IngressSecret, "s", row[split:]) if row[split] is not None else None
    current = (
        Current(route.pk, digests[0], secret.pk, digests[1]) if secret is not None and digests[1] is not None else None
    )
    return Found(route, secret, current)


# The route's and its credential's columns, and the digests of both rows ((None, None) on SQLite).
RouteRow = tuple[Sequence[Any], Sequence[Any]]


def _route_row_with_digests(columns: str, source: str, params: list[str]) -> RouteRow | None:
    # md5 of each row's text: what the creating statement compares (_GUARD). Prepared: planned
    # once per connection.
    row = prepared_row(f"SELECT {columns}, md5(r::text), md5(s::text) FROM {source}", params)
    if row is None:
        return None
    return row[:-2], row[-2:]


def _route_row_plain(columns: str, source: str, params: list[str]) -> RouteRow | None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {columns} FROM {source}", params)
        row = cursor.fetchone()
    return None if row is None else (row, (None, None))


_route_row = ByVendor[Callable[[str, str, list[str]], RouteRow | None]](
    postgresql=_route_row_with_digests, sqlite=_route_row_plain
)


# What every creating statement below checks before it inserts anything: the route and the
# credential rows are still those the request was checked against (on the statement's snapshot).
_GUARD = (
    f"EXISTS (SELECT 1 FROM {Route._meta.db_table} r WHERE r.id = %(g_route)s"
    " AND md5(r::text) = %(g_route_digest)s)"
    f" AND EXISTS (SELECT 1 FROM {IngressSecret._meta.db_table} s WHERE s.id = %(g_secret)s"
    " AND md5(s::text) = %(g_secret_digest)s)"
)


def _guard_params(current: Current, route_name: str) -> dict[str, Any]:
    return {
        "g_route": current.route_id,
        "g_route_digest": current.route_digest,
        "g_secret": current.secret_id,
        "g_secret_digest": current.secret_digest,
        "g_name": route_name,
    }


def _probe(read: str, also: str | None) -> str:
    """The lead's probe: whether the guard held, the caller's `also` (one value, a scalar
    subquery that may use %(g_name)s, the route's name), then `read`'s row or NULLs."""
    return (
        f"SELECT ({_GUARD}) AS current, ({also or 'SELECT NULL'}) AS also, kept.*"
        f" FROM (SELECT 1) one LEFT JOIN LATERAL ({read}) kept ON true"
    )


@dataclass(frozen=True)
class Probed:
    """What a guarded lead's statement read besides its insert."""

    current: bool  # False: the route or credential changed; nothing was written
    also: Any
    rest: tuple[Any, ...]


def probed(probe: Sequence[Any]) -> Probed:
    return Probed(bool(probe[0]), probe[1], tuple(probe[2:]))


# The idempotency key ahead of its instance (engine/sql/create.py runs it first in the statement
# that inserts the instance): a new key inserts; an expired one is replaced in place (its old
# instance is no longer the answer); a live one returns nothing and the probe reads it, with its
# instance's outcome, on the statement's snapshot. A concurrent twin's insert waits on the
# unique index until the first commits, then returns nothing too; its probe cannot see that row
# (it committed after the snapshot), so the caller reads it again (`idempotency_key_read`).
_KEY_TABLE = IdempotencyKey._meta.db_table
_KEY_LEAD = f"""
    INSERT INTO {_KEY_TABLE} (tenant, route, key, body_sha256, instance_id, created_at, expires_at)
    SELECT %(k_tenant)s, %(k_route)s, %(k_key)s, %(k_digest)s, %(k_instance)s, %(k_now)s, %(k_expires)s
    WHERE {_GUARD}
    ON CONFLICT (tenant, route, key) DO UPDATE SET body_sha256 = EXCLUDED.body_sha256,
        instance_id = EXCLUDED.instance_id, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
    WHERE {_KEY_TABLE}.expires_at <= EXCLUDED.created_at
    RETURNING 1"""
_KEY_READ = f"""
    SELECT k.instance_id, k.body_sha256, k.expires_at, i.status, i.output, i.error_name, i.error_message
    FROM {_KEY_TABLE} k LEFT JOIN {Instance._meta.db_table} i ON i.id = k.instance_id
    WHERE k.tenant = %(k_tenant)s AND k.route = %(k_route)s AND k.key = %(k_key)s"""


@dataclass(frozen=True)
class KeptKey:
    """An idempotency key's row and what its instance is now (status None: the instance is gone)."""

    instance_id: str
    body_sha256: str
    expires_at: datetime
    status: str | None
    output: Any
    error_name: str
    error_message: str


def _kept(row: Sequence[Any]) -> KeptKey | None:
    if row[0] is None:
        return None
    output = json.loads(row[4]) if isinstance(row[4], str) else row[4]  # jsonb arrives as text
    return KeptKey(row[0], row[1], aware(row[2]), row[3], output, row[5] or "", row[6] or "")


def idempotency_key_lead(
    *,
    tenant: str,
    route: str,
    key: str,
    digest: str,
    instance_id: str,
    now: datetime,
    expires_at: datetime,
    current: Current,
    also: str | None = None,
) -> Lead:
    return Lead(
        _KEY_LEAD,
        {
            "k_tenant": tenant,
            "k_route": route,
            "k_key": key,
            "k_digest": digest,
            "k_instance": instance_id,
            "k_now": now,
            "k_expires": expires_at,
            **_guard_params(current, route),
        },
        _probe(_KEY_READ, also),
    )


def idempotency_key_kept(rest: Sequence[Any]) -> KeptKey | None:
    """The key row a lead's probe read (`Probed.rest`; None: not visible to the statement)."""
    return _kept(rest)


def idempotency_key_read(*, tenant: str, route: str, key: str) -> KeptKey | None:
    row = prepared_row(_KEY_READ, {"k_tenant": tenant, "k_route": route, "k_key": key})
    return None if row is None else _kept(row)


# A signed request without an Idempotency-Key: its signature's digest ahead of its instance. A
# replay inserts nothing; the probe names the instance the first one started.
_SEEN_TABLE = SeenSignature._meta.db_table
_SEEN_LEAD = f"""
    INSERT INTO {_SEEN_TABLE} (digest, tenant, route, instance_id, expires_at)
    SELECT %(s_digest)s, %(s_tenant)s, %(s_route)s, %(s_instance)s, %(s_expires)s
    WHERE {_GUARD}
    ON CONFLICT (digest) DO NOTHING
    RETURNING 1"""
_SEEN_READ = f"SELECT instance_id FROM {_SEEN_TABLE} WHERE digest = %(s_digest)s"


def seen_signature_lead(seen: SeenSignature, *, current: Current, also: str | None = None) -> Lead:
    return Lead(
        _SEEN_LEAD,
        {
            "s_digest": seen.digest,
            "s_tenant": seen.tenant,
            "s_route": seen.route,
            "s_instance": seen.instance_id,
            "s_expires": seen.expires_at,
            **_guard_params(current, seen.route),
        },
        _probe(_SEEN_READ, also),
    )


def seen_signature_read(*, digest: str) -> str | None:
    row = prepared_row(_SEEN_READ, {"s_digest": digest})
    return None if row is None else str(row[0])


# A request's token from one ingress bucket in one statement (PostgreSQL): the row is created
# full on first use, else refilled for the time since it was last written and a token taken, all
# under the row lock ON CONFLICT takes, so concurrent requests queue on the row and each sees
# the one before. The arithmetic is `buckets.take`'s (a changed rate applies from now on, as
# `_locked` then `take` did). Nothing is written when the bucket is blocked or short of a token:
# no row comes back and the caller asks the locked path how long to wait.
_BUCKET_TABLE = TokenBucket._meta.db_table
_REFILLED = (
    "least(EXCLUDED.capacity, b.tokens + greatest(0, extract(epoch FROM EXCLUDED.updated_at - b.updated_at)"
    "::float8) * EXCLUDED.refill_per_second)"
)
_TAKE_ONE = f"""
    INSERT INTO {_BUCKET_TABLE} AS b (key, capacity, refill_per_second, tokens, updated_at, blocked_until)
    VALUES (%(key)s, %(capacity)s, %(refill)s, %(capacity)s - 1, %(now)s, NULL)
    ON CONFLICT (key) DO UPDATE SET capacity = EXCLUDED.capacity, refill_per_second = EXCLUDED.refill_per_second,
        tokens = {_REFILLED} - 1, updated_at = greatest(EXCLUDED.updated_at, b.updated_at), blocked_until = NULL
    WHERE (b.blocked_until IS NULL OR b.blocked_until <= EXCLUDED.updated_at) AND {_REFILLED} >= 1
    RETURNING 1"""


def bucket_take_one(*, key: str, capacity: float, refill: float, now: datetime) -> bool:
    """Take one token from bucket `key` (created full with `capacity` and `refill` per second if
    new; its rates set to these if not): True when taken, False when nothing was written (always
    on SQLite, whose single writer takes the locked path)."""
    return _take_one()(key, capacity, refill, now)


def _take_one_statement(key: str, capacity: float, refill: float, now: datetime) -> bool:
    return prepared_row(_TAKE_ONE, {"key": key, "capacity": capacity, "refill": refill, "now": now}) is not None


def _take_none(key: str, capacity: float, refill: float, now: datetime) -> bool:
    return False


_take_one = ByVendor[Callable[[str, float, float, datetime], bool]](postgresql=_take_one_statement, sqlite=_take_none)
