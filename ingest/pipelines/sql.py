"""The pipelines' raw SQL: the webhook's lookup of its connection, asked on every post."""

from __future__ import annotations

from django.db import connection

from ingest.engine.sql.base import is_postgres, prepared_row
from ingest.pipelines.models import Connection

# What a webhook reads of its connection: the credentials are encrypted, and decrypting them on
# every post was a good share of a webhook's CPU (any other field still loads on access).
WEBHOOK_FIELDS = ("id", "tenant", "kind", "options", "enabled")
_BY_WEBHOOK_KEY = (f"SELECT {', '.join(WEBHOOK_FIELDS)} FROM {Connection._meta.db_table}"
                   " WHERE kind = %s AND webhook_key_hash = ANY(%s) AND enabled ORDER BY id LIMIT 1")


def connection_by_webhook_hashes(*, kind: str, hashes: list[str]) -> Connection | None:
    """The enabled connection of `kind` whose webhook key hashes to one of `hashes`, its
    webhook fields loaded (PostgreSQL: a prepared statement, planned once per connection)."""
    if not is_postgres():
        return (Connection.objects.filter(kind=kind, webhook_key_hash__in=hashes, enabled=True)
                .only(*WEBHOOK_FIELDS).order_by("id").first())
    row = prepared_row(_BY_WEBHOOK_KEY, [kind, hashes])
    if row is None:
        return None
    options = Connection._meta.get_field("options").from_db_value(row[3], None, connection)  # type: ignore[arg-type]
    return Connection.from_db(connection.alias, list(WEBHOOK_FIELDS), [*row[:3], options, row[4]])
