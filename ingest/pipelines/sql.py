"""The pipelines' raw SQL: the webhook's lookup of its connection, and the condition a webhook's
creating statement checks that the connection it kept is unchanged."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from ingest.engine.sql.base import is_postgres, prepared_row
from ingest.engine.sql.create import Guard
from ingest.pipelines.models import Connection

# What a webhook reads of its connection: the credentials are encrypted, and decrypting them on
# every post was a good share of a webhook's CPU (any other field still loads on access).
WEBHOOK_FIELDS = ("id", "tenant", "kind", "options", "enabled")
_TABLE = Connection._meta.db_table
# A digest of what a webhook depends on: the fields it reads and the key's hash. Only these: a
# worker storing a refreshed Salesforce access token on the row does not drop a kept connection.
_DIGEST = "md5(row(c.tenant, c.kind, c.options, c.enabled, c.webhook_key_hash)::text)"
_BY_WEBHOOK_KEY = (f"SELECT {', '.join('c.' + f for f in WEBHOOK_FIELDS)}, {_DIGEST} FROM {_TABLE} c"
                   " WHERE c.kind = %s AND c.webhook_key_hash = ANY(%s) AND c.enabled ORDER BY c.id LIMIT 1")
_GUARD = (f"EXISTS (SELECT 1 FROM {_TABLE} c WHERE c.id = %(g_connection)s"
          f" AND {_DIGEST} = %(g_connection_digest)s)")


@dataclass(frozen=True)
class WebhookConnection:
    """A connection as a webhook's lookup found it, and (PostgreSQL) the guard under which a
    creating statement inserts only while the row still says what the lookup read."""

    connection: Connection
    guard: Guard | None


def connection_by_webhook_hashes(*, kind: str, hashes: list[str]) -> Connection | None:
    """The enabled connection of `kind` whose webhook key hashes to one of `hashes`, its
    webhook fields loaded (PostgreSQL: a prepared statement, planned once per connection)."""
    found = webhook_connection_by_hashes(kind=kind, hashes=hashes)
    return None if found is None else found.connection


def webhook_connection_by_hashes(*, kind: str, hashes: list[str]) -> WebhookConnection | None:
    """`connection_by_webhook_hashes` with the guard that the row is unchanged (None on SQLite)."""
    if not is_postgres():
        row = (Connection.objects.filter(kind=kind, webhook_key_hash__in=hashes, enabled=True)
               .only(*WEBHOOK_FIELDS).order_by("id").first())
        return None if row is None else WebhookConnection(row, None)
    found = prepared_row(_BY_WEBHOOK_KEY, [kind, hashes])
    if found is None:
        return None
    options = Connection._meta.get_field("options").from_db_value(found[3], None, connection)  # type: ignore[arg-type]
    row = Connection.from_db(connection.alias, list(WEBHOOK_FIELDS), [*found[:3], options, found[4]])
    return WebhookConnection(row, Guard(_GUARD, {"g_connection": row.pk, "g_connection_digest": found[5]}))
