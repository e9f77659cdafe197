"""The `superseded_by` reference is checked when the row is written, not at COMMIT.

Django creates every foreign key on PostgreSQL as DEFERRABLE INITIALLY DEFERRED, so the check
of a superseded fact's winner ran at COMMIT, after `ingest_fact_put` had returned and outside
its `enable_seqscan = off` (migration 0005). PostgreSQL keeps the check's plan for the session,
and a plan made while the fact table was small (a new install's first ingest, a table grown
from empty since its last ANALYZE) scans the whole table on every superseding write for as long
as the connection lives: on the pipeline benchmark about 2,700 scans and 22 million rows read
per 1,000 calls, doubling PostgreSQL's CPU per call, in the runs where autovacuum had not
analyzed the table early. Checked immediately, the lookup runs inside the function, under its
setting, and is planned on the primary key.

Nothing writes a fact that points at a later one in the same transaction (the function and the
SQLite path both point losers at a fact that exists), so no writer needs the deferral.

Django does not model a foreign key's deferrability: an AlterField on `superseded_by` would
recreate the constraint deferred. tests/ingest/test_facts.py checks that it is not.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

FIND = """
SELECT c.conname FROM pg_constraint c
  JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
 WHERE c.conrelid = 'ingest_fact'::regclass AND c.contype = 'f' AND a.attname = 'superseded_by_id'
"""


def _alter(schema_editor: Any, mode: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(FIND)
        names = [name for (name,) in cursor.fetchall()]
    for name in names:
        schema_editor.execute(f"ALTER TABLE ingest_fact ALTER CONSTRAINT {schema_editor.quote_name(name)} {mode}")


def forward(apps: Any, schema_editor: Any) -> None:
    _alter(schema_editor, "NOT DEFERRABLE")


def backward(apps: Any, schema_editor: Any) -> None:
    _alter(schema_editor, "DEFERRABLE INITIALLY DEFERRED")


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0005_fact_put_without_seqscans"),
    ]

    operations = [
        migrations.RunPython(forward, backward),
    ]
