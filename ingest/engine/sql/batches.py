"""A bulk action's frozen selection: the ids a preview counted, copied in one statement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection


def batch_items_freeze(*, batch_id: int, select_sql: str, params: Sequence[Any]) -> int:
    """Copy the (id, tenant) rows `select_sql` returns into the batch's items; how many.

    One INSERT … SELECT: 10,000 ids never travel to Python and back, and the set written is the
    set the statement saw (one snapshot), which is what the preview then counts."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO engine_batch_item (batch_id, instance_id, tenant, state, detail) "
            f"SELECT %s, s.id, s.tenant, 'pending', '' FROM ({select_sql}) s",  # noqa: S608 - compiled by the ORM
            [batch_id, *params],
        )
        return int(cursor.rowcount)
