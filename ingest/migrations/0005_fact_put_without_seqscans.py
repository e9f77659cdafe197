"""`ingest_fact_put` plans its lookups with sequential scans priced out.

PL/pgSQL keeps each statement's plan for the session. Planned while `ingest_fact` was small (a
new tenant's first ingest, or a table grown from empty since its last ANALYZE), the lookup by
id and the rivals query scanned the whole table, and kept doing so as it grew: on the pipeline
benchmark 3.2 billion rows read for 18,000 facts, most of PostgreSQL's time per call. Both
statements have an index (the primary key, `fact_rivals`); with the setting on the function
the planner uses them whatever the table's statistics say. The setting holds only while the
function runs.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

SIGNATURE = """ingest_fact_put(varchar, varchar, varchar, varchar, jsonb, double precision, varchar,
    varchar, text, timestamptz, integer, varchar, timestamptz, boolean, bigint, text[], integer[])"""


def forward(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER FUNCTION {SIGNATURE} SET enable_seqscan = off")


def backward(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER FUNCTION {SIGNATURE} RESET enable_seqscan")


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0004_fact_rivals_index"),
    ]

    operations = [
        migrations.RunPython(forward, backward),
    ]
