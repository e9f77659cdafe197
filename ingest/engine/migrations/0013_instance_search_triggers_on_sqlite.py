"""On SQLite, the params-search triggers of 0006 again.

SQLite cannot add a column with a default in place: Django rebuilds `engine_instance` (new table,
copy, drop, rename), and the triggers of the dropped table go with it. 0010 (versions and forks)
added columns that way, so on SQLite new instances stopped getting their search row, and the
instances list's text filter stopped finding them. This puts the triggers back and writes the
rows the gap missed. PostgreSQL alters the table in place and keeps its triggers: nothing to do.

Any later migration that rebuilds `engine_instance` on SQLite must do the same, and since 0019
also run `_attributes_sqlite.REBUILD` (the attribute rows' copy of the instance's list columns);
tests/engine/test_instance_search.py and test_instance_attributes_columns.py fail on SQLite
when one forgets.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

from ingest.engine.migrations import _search_sqlite


def forwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "sqlite":
        return
    for statement in _search_sqlite.REBUILD:
        schema_editor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ("engine", "0012_search_attributes_and_batches"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
