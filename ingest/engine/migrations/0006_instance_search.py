"""The params search moves to its own table, written by triggers; api_costs loses two copies of
its instance index.

`instance_params_trgm` (0004) indexed the trigrams of every instance's params on
`engine_instance` itself. Claims and completions update that row outside HOT (they change
indexed columns: status, the lease), and PostgreSQL then writes a new entry in every index,
this one too: all the trigrams of the params again, for every claim and every completion. On
the pipeline benchmark (params carry a call transcript, 1.4 kB) a claim cost 1.24 ms and a group
commit with instance completions 1.55 ms; without the trigram index 0.37 and 0.66 ms.

`engine_instance_search` holds the params' text, written by a trigger on the instance's insert
and on an update that sets params (nothing sets them after the insert today), so every path
that creates instances (the services, children, the admin, tests' factories) is covered, on
SQLite too. The trigram index is on that table.
"""

from __future__ import annotations

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

from ingest.engine.migrations import _search_sqlite

PG_FORWARDS = """
CREATE FUNCTION engine_instance_search_put() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO engine_instance_search (instance_id, text) VALUES (NEW.id, NEW.params::text)
    ON CONFLICT (instance_id) DO UPDATE SET text = EXCLUDED.text;
    RETURN NULL;
END $$;
CREATE TRIGGER engine_instance_search_insert AFTER INSERT ON engine_instance
    FOR EACH ROW EXECUTE FUNCTION engine_instance_search_put();
CREATE TRIGGER engine_instance_search_update AFTER UPDATE OF params ON engine_instance
    FOR EACH ROW WHEN (OLD.params IS DISTINCT FROM NEW.params) EXECUTE FUNCTION engine_instance_search_put();
INSERT INTO engine_instance_search (instance_id, text) SELECT id, params::text FROM engine_instance;
"""
PG_BACKWARDS = """
DROP TRIGGER IF EXISTS engine_instance_search_insert ON engine_instance;
DROP TRIGGER IF EXISTS engine_instance_search_update ON engine_instance;
DROP FUNCTION IF EXISTS engine_instance_search_put();
"""
# SQLite's triggers live in _search_sqlite.py, shared with 0013, which puts them back after a
# table rebuild dropped them.
SQLITE_FORWARDS = [
    *_search_sqlite.CREATE,
    f"""INSERT INTO engine_instance_search (instance_id, text)
        SELECT id, {_search_sqlite.SQLITE_TEXT.format(params="params")} FROM engine_instance""",
]
SQLITE_BACKWARDS = [
    "DROP TRIGGER IF EXISTS engine_instance_search_insert",
    "DROP TRIGGER IF EXISTS engine_instance_search_update",
]
TRGM = "SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'"


def _run(schema_editor: Any, *, sqlite: list[str], postgresql: str, trgm_index: str) -> None:
    """The vendor's statements; on PostgreSQL with pg_trgm (0004 created it where it could), the
    trigram index too."""
    if schema_editor.connection.vendor == "sqlite":
        for statement in sqlite:
            schema_editor.execute(statement)
        return
    schema_editor.execute(postgresql)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(TRGM)
        if cursor.fetchone() is not None:
            schema_editor.execute(trgm_index)


def forwards(apps: Any, schema_editor: Any) -> None:
    _run(schema_editor, sqlite=SQLITE_FORWARDS, postgresql=PG_FORWARDS,
         trgm_index="CREATE INDEX engine_instance_search_trgm ON engine_instance_search "
                    "USING gin (UPPER(text) gin_trgm_ops)")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS instance_params_trgm")


def backwards(apps: Any, schema_editor: Any) -> None:
    _run(schema_editor, sqlite=SQLITE_BACKWARDS, postgresql=PG_BACKWARDS,
         trgm_index="CREATE INDEX IF NOT EXISTS instance_params_trgm ON engine_instance "
                    "USING gin ((UPPER((params)::text)) gin_trgm_ops)")


class Migration(migrations.Migration):

    dependencies = [
        ("engine", "0005_hot_path_indexes"),
    ]

    operations = [
        migrations.CreateModel(
            name="InstanceSearch",
            fields=[
                ("instance", models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.CASCADE,
                                                  primary_key=True, related_name="search", serialize=False,
                                                  to="engine.instance")),
                ("text", models.TextField()),
            ],
            options={
                "db_table": "engine_instance_search",
            },
        ),
        migrations.RunPython(forwards, backwards),
        migrations.AlterField(
            model_name="apicost",
            name="instance",
            field=models.ForeignKey(blank=True, db_index=False, null=True,
                                    on_delete=django.db.models.deletion.SET_NULL, related_name="costs",
                                    to="engine.instance"),
        ),
    ]
