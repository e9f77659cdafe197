"""Long statements (the creating statements: over psycopg's 4,096 bytes and 50 parameters) are
converted from `%(name)s` to `$n` once per process, with psycopg's own result."""

from __future__ import annotations

import pytest

from ingest.engine.sql import base

pytestmark = [pytest.mark.db, pytest.mark.django_db]

# 60 named parameters and well over 4,096 bytes, a literal '%%' and a repeated name among them.
_LONG = (
    "SELECT "
    + ", ".join(f"%(p{n})s::int AS {'c' * 60}{n}" for n in range(60))
    + ", %(p0)s::int + 1 AS again, '100%%' AS percent"
)


def test_a_long_statement_is_converted_once_as_psycopg_converts_it(require_postgres: None) -> None:
    from django.db import connection
    from psycopg import _queries

    params = {f"p{n}": n for n in range(60)}
    assert len(_LONG) > _queries.MAX_CACHED_STATEMENT_LENGTH and len(params) > _queries.MAX_CACHED_STATEMENT_PARAMS
    base._converted.cache_clear()
    for _ in range(3):
        row = base.prepared_row(_LONG, params)
        assert row == (*range(60), 1, "100%")
    assert base._converted.cache_info().misses == 1 and base._converted.cache_info().hits == 2
    from psycopg.adapt import Transformer

    connection.ensure_connection()
    tx = Transformer(connection.connection)
    ours, theirs = base._cursor_class()._query_cls(tx), _queries.PostgresQuery(tx)
    for query in (ours, theirs):
        query.convert(_LONG, params)
    assert (ours.query, ours.params, ours.types) == (theirs.query, theirs.params, theirs.types)
