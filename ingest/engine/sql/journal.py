"""The call journal's write (runtime/journal.py) on PostgreSQL: one prepared statement, committed
on its own or with the transaction it joins, and the same row as a part of a cost's record.

Through the ORM an entry took three round trips (BEGIN, the upsert, COMMIT), and a booking's entry
three more around the cost statement; a Gong call makes one paid call and one booking, so the
journal alone had doubled the round trips of its LLM step. SQLite writes the entry with the ORM.
"""

from __future__ import annotations

from typing import Any

from ingest.engine.models import CallJournal
from ingest.engine.sql.base import prepared_row

TABLE = CallJournal._meta.db_table
COLUMNS = "instance_id, key, ordinal, attempt, kind, provider, fingerprint, answer, created_at"
# Typed, so one prepared statement serves a cost's record with an entry and without one (NULLs).
VALUES = (
    "%(j_instance)s::varchar, %(j_key)s::varchar, %(j_ordinal)s::integer, %(j_attempt)s::integer,"
    " %(j_kind)s::varchar, %(j_provider)s::varchar, %(j_fingerprint)s::varchar, %(j_answer)s::jsonb,"
    " %(j_now)s::timestamptz"
)
# A row an earlier attempt left at the same ordinal of the step is replaced.
UPSERT = (
    "ON CONFLICT (key, ordinal) DO UPDATE SET attempt = EXCLUDED.attempt, kind = EXCLUDED.kind,"
    " provider = EXCLUDED.provider, fingerprint = EXCLUDED.fingerprint, answer = EXCLUDED.answer,"
    " created_at = EXCLUDED.created_at"
)
NO_ENTRY: dict[str, Any] = {
    name: None
    for name in ("j_instance", "j_key", "j_ordinal", "j_attempt", "j_kind", "j_provider", "j_fingerprint", "j_answer")
} | {"j_now": None}
_WRITE = f"INSERT INTO {TABLE} ({COLUMNS}) VALUES ({VALUES}) {UPSERT} RETURNING 1"


def journal_write(entry: dict[str, Any]) -> None:
    """Write one entry (`j_*` parameters; `j_answer` as JSON text)."""
    prepared_row(_WRITE, entry)
