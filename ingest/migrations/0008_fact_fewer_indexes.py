"""Four indexes fewer on `ingest_fact`, each written on every insert and every supersede.

Every fact insert and every superseding update (it changes `valid`, so it is never a HOT
update) wrote nine index entries. Four served no query:

- `tenant` alone, and its `varchar_pattern_ops` twin: every index below leads with the tenant,
  so a query by tenant alone uses one of them;
- the `varchar_pattern_ops` indexes PostgreSQL gets from Django for `id` and `superseded_by`:
  they serve `LIKE 'prefix%'` lookups, which nothing runs on fact ids.

On the pipeline benchmark the fact insert and the loser's update were 2.7 of the 6 ms per call
that `ingest_fact_put` spends in PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

PATTERN_INDEXES = """
SELECT i.relname FROM pg_index x
  JOIN pg_class i ON i.oid = x.indexrelid
  JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = x.indkey[0]
  JOIN pg_opclass o ON o.oid = x.indclass[0]
 WHERE x.indrelid = 'ingest_fact'::regclass AND x.indnatts = 1 AND o.opcname = 'varchar_pattern_ops'
   AND a.attname IN ('id', 'superseded_by_id')
"""


def drop_pattern_indexes(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(PATTERN_INDEXES)
        names = [name for (name,) in cursor.fetchall()]
    for name in names:
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")


def create_pattern_indexes(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for column in ("id", "superseded_by_id"):
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS ingest_fact_{column}_like ON ingest_fact ({column} varchar_pattern_ops)"
        )


class Migration(migrations.Migration):

    dependencies = [
        ("ingest", "0007_fact_head"),
    ]

    operations = [
        migrations.AlterField(
            model_name="fact",
            name="tenant",
            field=models.CharField(max_length=100),
        ),
        migrations.RunPython(drop_pattern_indexes, create_pattern_indexes),
    ]
