"""Without the `varchar_pattern_ops` index Django gives `engine_instance_search`'s character
primary key (for `LIKE 'prefix%'`, which nothing runs on that table; each insert wrote it).

Its own migration: Django creates that index at the end of the migration that creates the table
(0006), after any operation of it could drop it.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

PATTERN_INDEX = """
SELECT i.relname FROM pg_index x
  JOIN pg_class i ON i.oid = x.indexrelid
  JOIN pg_opclass o ON o.oid = x.indclass[0]
 WHERE x.indrelid = 'engine_instance_search'::regclass AND o.opcname = 'varchar_pattern_ops'
"""


def forwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(PATTERN_INDEX)
        names = [name for (name,) in cursor.fetchall()]
    for name in names:
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")


def backwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("CREATE INDEX IF NOT EXISTS engine_instance_search_instance_id_like "
                              "ON engine_instance_search (instance_id varchar_pattern_ops)")


class Migration(migrations.Migration):
    dependencies = [("engine", "0006_instance_search")]
    operations = [migrations.RunPython(forwards, backwards)]
