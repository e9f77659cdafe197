"""The engine's database plumbing below every statement: the vendor, the prepared-statement
paths (this thread's Django connection, or an engine connection of its own), and the SQL
fragments several statement families share."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections

FINISHED_OR_PAUSED = "('paused', 'complete', 'completed_with_errors', 'errored', 'terminated')"


_vendor = ""


def is_postgres() -> bool:
    # Asked several times per step; the default database's vendor cannot change in a process.
    global _vendor
    if not _vendor:
        _vendor = connection.vendor
    return _vendor == "postgresql"


T = TypeVar("T")


class ByVendor(Generic[T]):
    """One concern's differences between the two databases: an implementation for PostgreSQL
    and one for SQLite (any other vendor is taken for SQLite, as `is_postgres` does), chosen at
    first use for the default database and kept. A module that holds a concern's differences
    keeps them here, so the code that calls it has one path; calling `impl()` costs one
    attribute read once chosen."""

    __slots__ = ("_chosen", "_postgresql", "_sqlite")

    def __init__(self, *, postgresql: T, sqlite: T) -> None:
        self._postgresql, self._sqlite = postgresql, sqlite
        self._chosen: T | None = None

    def __call__(self) -> T:
        chosen = self._chosen
        if chosen is None:
            chosen = self._chosen = self._postgresql if connection.vendor == "postgresql" else self._sqlite
        return chosen


# What a claim writes: the lease, the turn count, the first start, and running for the ledger.
LEASE_SET = """lease_owner = %(owner)s, lease_token = %(token)s, lease_expires_at = %(until)s,
        run_count = i.run_count + 1, updated_at = %(now)s,
        started_at = COALESCE(i.started_at, %(now)s),
        status = CASE WHEN i.status IN ('queued', 'waiting') THEN 'running' ELSE i.status END"""

STEP_COLUMNS = """engine_step (instance_id, name, seq, position, kind, status, result, error_name,
                error_message, error_traceback, config, attempts, sensitive, has_rollback, started_at,
                ended_at, wake_at, event_type, child_id)"""

RELEASE = "lease_owner = '', lease_token = '', lease_expires_at = NULL"
HISTORY_COLUMNS = """engine_history (instance_id, workflow, tenant, kind, step_name, status, data,
                                    actor, reason, created_at)"""
HELD = "id = %(iid)s AND lease_token = %(token)s AND lease_expires_at > %(now)s"


def aware(value: Any) -> datetime:
    if isinstance(value, str):  # SQLite without a declared type on the column: text
        from django.utils.dateparse import parse_datetime

        value = parse_datetime(value)
    if value.tzinfo is None:
        from datetime import UTC

        value = value.replace(tzinfo=UTC)
    return value  # type: ignore[no-any-return]


def prepare_session(raw: Any) -> None:
    if raw.prepare_threshold is None:
        # Django turns preparation off for its connections (None). Its own cursors bind on the
        # client and never prepare whatever this says; only the engine's cursors here do.
        raw.prepare_threshold = 5


def engine_connection() -> Any:
    """A psycopg connection of the engine's own (autocommit, statements prepared), for a thread
    that runs nothing but the engine's hot statements: the group commit and a worker's claims.

    Sequential scans are priced out on it. Every table access of those statements has an index
    (primary keys, the step's unique occurrence, the claim's partial index), but the planner
    picks an index only when it knows the table is large: on a ledger that has grown from empty
    since it was last analyzed (a fresh install; autovacuum analyses it within a minute or so)
    it plans scans of the whole instance table, and a prepared statement keeps that plan for
    the life of the connection, and every step pays for those scans (docs/pipelines.md).
    """
    import psycopg
    from psycopg.types.string import TextLoader

    from ingest.engine.pg import connection_string

    raw = psycopg.connect(connection_string(), autocommit=True, prepare_threshold=5)
    for json_type in ("json", "jsonb"):
        raw.adapters.register_loader(json_type, TextLoader)  # JSON arrives as text, as on Django's
    raw.execute("SET enable_seqscan = off")
    return raw


@functools.lru_cache(maxsize=512)
def _converted(query: bytes, encoding: str) -> Any:
    from psycopg import _queries

    return _queries._query2pg_nocache(query, encoding)


@functools.cache
def _cursor_class() -> Any:
    """psycopg's cursor, converting each statement's `%(name)s` placeholders to `$n` once per
    process. psycopg keeps that conversion only for statements under 4,096 bytes and 50
    parameters (`MAX_CACHED_STATEMENT_LENGTH`): the creating statements are longer and have more,
    and their conversion (a tokenizer over the whole text) on every call was the largest share of
    an ingress request's web CPU after the round trip itself. The statements here are a fixed set
    (module constants and cached builds), so the cache stays small. Built on psycopg's internals
    (`psycopg._queries`, psycopg 3.3, pinned): tests/engine/test_sql_base.py checks the result
    against psycopg's own conversion."""
    import psycopg
    from psycopg import _queries

    class KeptQuery(_queries.PostgresQuery):
        def convert(self, query: Any, vars: Any) -> None:
            if vars is None or not isinstance(query, str | bytes):
                super().convert(query, vars)
                return
            converted = _converted(self._ensure_bytes(query), self._tx.encoding)
            self.query, self._want_formats, self._order, self._parts = converted
            self.dump(vars)

    class KeptCursor(psycopg.Cursor[Any]):
        _query_cls = KeptQuery

    return KeptCursor


def prepared(raw: Any, statement: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    """Run `statement` on a psycopg connection as a server-side prepared statement: parsed and
    analysed once per connection instead of at every step (a quarter of PostgreSQL's time on
    the step path when each statement was sent as text). PostgreSQL's own plan cache decides
    between custom and generic plans (plan_cache_mode auto); forcing generic plans measured no
    faster and would pin plans made while the tables were still empty."""

    cursor = kept_cursor(raw, statement)
    cursor.execute(statement, params, prepare=True)
    row: tuple[Any, ...] | None = cursor.fetchone()
    return row


def kept_cursor(raw: Any, statement: str) -> Any:
    """The cursor that runs `statement` on `raw`, a psycopg connection, kept with the connection
    (which one thread uses at a time): psycopg keeps the dumpers it picked for the parameters in
    the cursor, and a fresh cursor per step looked them up again. A connection's cursors go with
    it when it is closed or replaced."""
    prepare_session(raw)
    cursors: dict[str, Any] | None = getattr(raw, "_runledger_cursors", None)
    if cursors is None:
        cursors = raw._runledger_cursors = {}
    cursor = cursors.get(statement)
    if cursor is None:
        cursor = cursors[statement] = _cursor_class()(raw)
    return cursor


def prepared_row(statement: str, params: dict[str, Any] | Sequence[Any]) -> tuple[Any, ...] | None:
    """`statement` as a prepared statement on this thread's Django connection (in its
    transaction if one is open), its first row back (`_prepared`)."""
    row: tuple[Any, ...] | None = _prepared(statement, params, fetch_all=False)
    return row


def prepared_rows(statement: str, params: dict[str, Any] | Sequence[Any]) -> list[tuple[Any, ...]]:
    """`statement` prepared as `prepared_row` does, all its rows back (a set-returning function's)."""
    rows: list[tuple[Any, ...]] = _prepared(statement, params, fetch_all=True)
    return rows


def _prepared(statement: str, params: dict[str, Any] | Sequence[Any], *, fetch_all: bool) -> Any:
    """`statement` as a prepared statement on this thread's Django connection (in its
    transaction if one is open), its first row or all its rows.

    Django's cursors bind on the client and never prepare; here PostgreSQL parses and plans the
    statement once per connection. The cursor is kept per connection and statement: psycopg keeps
    the dumpers it picked for the parameters in the cursor, and a fresh cursor per call looks
    them up again. Per connection, not per thread: under daphne each request runs on a thread of
    its own and takes a connection from the pool, so a thread's cursors were never used twice
    (a pooled connection serves one thread at a time). Errors go through Django's translation,
    so a broken connection is noticed and replaced. The engine's hot statements and the
    pipelines' (costs, facts) all run here.
    """
    import psycopg

    # `connection` is a proxy that finds this thread's connection on every attribute read (an
    # asgiref Local lookup each): found once here, it is read directly.
    conn = connections[DEFAULT_DB_ALIAS]
    conn.ensure_connection()
    with conn.wrap_database_errors:
        cursor: psycopg.Cursor[Any] = kept_cursor(conn.connection, statement)
        if conn.queries_logged:  # DEBUG or a test's CaptureQueriesContext: count it too
            conn.queries_log.append({"sql": statement, "time": "0.000"})
        cursor.execute(statement, params, prepare=True)
        return cursor.fetchall() if fetch_all else cursor.fetchone()


def drop_broken_connection() -> None:
    """Keep this thread's connection across turns (a new PostgreSQL backend per turn costs more
    than the turn), unless an error left it unusable."""
    if connection.connection is not None and connection.errors_occurred and not connection.is_usable():
        connection.close()
