"""The pipelines' raw SQL: the webhook's lookup of its connection, with the digest a webhook's
creating statement compares to know that the connection it kept is unchanged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection

from ingest.engine import ByVendor, RowUnchanged, prepared_row, row_digest_sql
from ingest.pipelines.models import Connection

# What a webhook reads of its connection: the credentials are encrypted, and decrypting them on
# every post was a good share of a webhook's CPU (any other field still loads on access).
WEBHOOK_FIELDS = ("id", "tenant", "kind", "options", "enabled")
_TABLE = Connection._meta.db_table
# What a webhook depends on: the fields it reads and the key's hash. Only these: a worker storing
# a refreshed Salesforce access token on the row does not drop a kept connection.
DIGEST_FIELDS = ("tenant", "kind", "options", "enabled", "webhook_key_hash")
_BY_WEBHOOK_KEY = (
    f"SELECT {', '.join('c.' + f for f in WEBHOOK_FIELDS)}, "
    f"{row_digest_sql(Connection, DIGEST_FIELDS, 'c')} FROM {_TABLE} c"
    " WHERE c.kind = %s AND c.webhook_key_hash = ANY(%s) AND c.enabled ORDER BY c.id LIMIT 1"
)


@dataclass(frozen=True)
class WebhookConnection:
    """A connection as a webhook's lookup found it, and (PostgreSQL) the guard a creating
    statement inserts under: only while the row still says what the lookup read."""

    connection: Connection
    guard: RowUnchanged | None


def connection_by_webhook_hashes(*, kind: str, hashes: list[str]) -> Connection | None:
    """The enabled connection of `kind` whose webhook key hashes to one of `hashes`, its
    webhook fields loaded (PostgreSQL: a prepared statement, planned once per connection)."""
    found = webhook_connection_by_hashes(kind=kind, hashes=hashes)
    return None if found is None else found.connection


def webhook_connection_by_hashes(*, kind: str, hashes: list[str]) -> WebhookConnection | None:
    """`connection_by_webhook_hashes` with the guard that the row is unchanged (None on SQLite)."""
    return _by_hashes()(kind, hashes)


def _by_hashes_orm(kind: str, hashes: list[str]) -> WebhookConnection | None:
    row = (
        Connection.objects.filter(kind=kind, webhook_key_hash__in=hashes, enabled=True)
        .only(*WEBHOOK_FIELDS)
        .order_by("id")
        .first()
    )
    return None if row is None else WebhookConnection(row, None)


def _by_hashes_prepared(kind: str, hashes: list[str]) -> WebhookConnection | None:
    found = prepared_row(_BY_WEBHOOK_KEY, [kind, hashes])
    if found is None:
        return None
    options = Connection._meta.get_field("options").from_db_value(found[3], None, connection)  # type: ignore[arg-type]
    row = Connection.from_db(connection.alias, list(WEBHOOK_FIELDS), [*found[:3], options, found[4]])
    return WebhookConnection(row, RowUnchanged(model=Connection, pk=row.pk, fields=DIGEST_FIELDS, digest=found[5]))


_by_hashes = ByVendor[Callable[[str, list[str]], WebhookConnection | None]](
    postgresql=_by_hashes_prepared, sqlite=_by_hashes_orm
)
