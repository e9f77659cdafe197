"""What must hold for `create` to insert an instance; the engine's creating statement checks it
(sql/create.py), so the check and the insert are one statement on one snapshot.

`RowUnchanged` is said in the caller's own terms (a model, a primary key, the fields it read): a
caller that keeps a row between requests (a webhook's connection) creates only while the row
still says what it read. `Lead` is a caller's own insert that decides (an idempotency key or a
seen signature in the triggers app): its statement text is the caller's, since what it inserts
is the caller's table.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Model


@functools.cache
def row_digest_sql(model: type[Model], fields: tuple[str, ...], alias: str) -> str:
    """The SQL expression (PostgreSQL) of a digest of `fields` of the row `alias` of `model`'s
    table: what a caller selects beside the row, and what `RowUnchanged` compares it with."""
    quote = connection.ops.quote_name
    column = {f.name: str(f.column) for f in model._meta.concrete_fields}
    columns = ", ".join(f"{alias}.{quote(column[name])}" for name in fields)
    return f"md5(row({columns})::text)"


@dataclass(frozen=True)
class Lead:
    """A caller's statement that runs first in the creating statement: the instance and its
    history are inserted only if `sql` (a data-modifying statement with RETURNING) returns a row.
    `probe` (a SELECT of at most one row, run on the statement's snapshot, so it sees what was
    committed before the statement began, not what the statement writes) is returned beside the
    outcome: what the caller needs when `sql` returned nothing. Both use %(name)s parameters,
    distinct from the `i<n>`/`h<n>` the columns use."""

    sql: str
    params: dict[str, Any]
    probe: str = "SELECT NULL"


@dataclass(frozen=True)
class RowUnchanged:
    """Create the instance only while the row `pk` of `model` still has the digest of `fields`
    the caller read with it (`row_digest_sql(model, fields, alias)` in the caller's SELECT).

    Checked by the creating statement itself, on its snapshot (PostgreSQL): when the row has
    changed or is gone nothing is written and `create` raises CheckedRowsChanged."""

    model: type[Model]
    pk: Any
    fields: tuple[str, ...]
    digest: str
