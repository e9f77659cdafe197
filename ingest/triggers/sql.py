"""Every raw SQL query of the triggers app, one typed function each: the advisory locks
(PostgreSQL only; callers check `connection.vendor` first, SQLite runs a single scheduler) and
the ingress lookup of a route with the caller's credential (both databases).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import Field, Model

from ingest.triggers.models import IngressSecret, Route

# Arbitrary but fixed: every scheduler process must ask for the same number.
SCHEDULER_LOCK_KEY = 0x52554E4C_53434844  # "RUNLSCHD"


def advisory_try_lock(key: int) -> bool:
    """Take the session-level lock `key` if nobody holds it; held until unlock or disconnect."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        return bool(cursor.fetchone()[0])


def advisory_unlock(key: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
        return bool(cursor.fetchone()[0])


def advisory_held(key: int) -> bool:
    """Whether this session holds lock `key` (a reconnect silently drops it)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND pid = pg_backend_pid() AND ((classid::bigint << 32) | objid::bigint) = %s)",
            [key],
        )
        return bool(cursor.fetchone()[0])


Converter = Callable[[Any, Any, Any], Any]


@cache
def _columns(model: type[Model], alias: str) -> tuple[str, list[str], list[tuple[Any, list[Converter]]]]:
    """A model's columns as `alias."column", ...`, their attribute names, and what turns each
    raw value into the field's value (the backend's converters and the field's own, e.g. the
    decryption of an EncryptedTextField): what the ORM applies when it reads the row."""
    fields: Sequence[Field[Any, Any]] = model._meta.concrete_fields
    cols = [field.get_col(alias) for field in fields]
    converters = [(col, [*connection.ops.get_db_converters(col), *col.get_db_converters(connection)])
                  for col in cols]
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


def route_with_secret(*, name: str, token_hash: str) -> tuple[Route, IngressSecret | None] | None:
    """The route `name` and the enabled ingress secret of its tenant whose token hashes to
    `token_hash` (None when there is none), in one round trip; None when no route has the name."""
    route_cols, route_names, _ = _columns(Route, "r")
    secret_cols, _, _ = _columns(IngressSecret, "s")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {route_cols}, {secret_cols} FROM {Route._meta.db_table} r"
            f" LEFT JOIN {IngressSecret._meta.db_table} s ON s.token_hash = %s"
            " AND s.tenant = r.tenant AND s.enabled WHERE r.name = %s",
            [token_hash, name],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(route_names)
    route = _build(Route, "r", row[:split])
    secret = _build(IngressSecret, "s", row[split:]) if row[split] is not None else None
    return route, secret
