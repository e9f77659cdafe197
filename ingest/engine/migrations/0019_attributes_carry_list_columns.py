"""engine_instance_attributes keeps a copy of the instance's tenant, workflow, status and times,
kept by triggers, so the instances list with an attribute filter reads that table alone for the
matches, the count and the sort.

Before, `?workflow=ingest&status=complete&attr=domain:d7.example&sort=-duration` over 1 M
instances found ~10,000 attribute rows through the GIN index, then read each one's instance row
for the status, the workflow and the times: ~19,000 pages, more than shared_buffers holds, so
p99 253 ms (issue 19; figures in docs/bulk-actions.md).

The copy is written in the transaction of each change, by triggers, so every path that changes
an instance (the engine's statements, the services, the admin, raw SQL) keeps it:
- on the attributes row's insert, the instance's columns, read under FOR SHARE: an instance
  update that is in flight finishes first and the copy sees it; one that comes later waits for
  this insert's commit and then finds the row to follow (below);
- on an instance update that changes one of the columns (`UPDATE OF` and `WHEN`: a heartbeat,
  a lease renewal or a step's write fire nothing), an update of the instance's attributes row,
  one primary-key probe that finds nothing for an instance without attributes.
No index on the copied columns: the instance's follow-up updates stay HOT when the page has room.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

from ingest.engine.migrations import _attributes_sqlite

_COLS = _attributes_sqlite.COLUMNS
_SET = ", ".join(_COLS)

PG_FORWARDS = f"""
CREATE FUNCTION engine_instance_attributes_copy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT {", ".join(f"i.{c}" for c in _COLS)} INTO {", ".join(f"NEW.{c}" for c in _COLS)}
    FROM engine_instance i WHERE i.id = NEW.instance_id FOR SHARE;
    RETURN NEW;
END $$;
CREATE TRIGGER engine_instance_attributes_copy BEFORE INSERT ON engine_instance_attributes
    FOR EACH ROW EXECUTE FUNCTION engine_instance_attributes_copy();
CREATE FUNCTION engine_instance_attributes_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE engine_instance_attributes SET ({_SET}) = ({", ".join(f"NEW.{c}" for c in _COLS)})
    WHERE instance_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER engine_instance_attributes_follow AFTER UPDATE OF {_SET} ON engine_instance
    FOR EACH ROW WHEN ({" OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in _COLS)})
    EXECUTE FUNCTION engine_instance_attributes_follow();
UPDATE engine_instance_attributes a SET ({_SET}) = ({", ".join(f"i.{c}" for c in _COLS)})
    FROM engine_instance i WHERE i.id = a.instance_id;
"""
PG_BACKWARDS = """
DROP TRIGGER IF EXISTS engine_instance_attributes_copy ON engine_instance_attributes;
DROP TRIGGER IF EXISTS engine_instance_attributes_follow ON engine_instance;
DROP FUNCTION IF EXISTS engine_instance_attributes_copy();
DROP FUNCTION IF EXISTS engine_instance_attributes_follow();
"""


def forwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_FORWARDS)
        return
    for statement in _attributes_sqlite.REBUILD_0019:
        schema_editor.execute(statement)


def backwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_BACKWARDS)
        return
    for statement in _attributes_sqlite.DROP_0019:
        schema_editor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ("engine", "0018_instance_status_covering"),
    ]

    operations = [
        migrations.AddField(model_name="instanceattributes", name="tenant",
                            field=models.CharField(blank=True, editable=False, max_length=100, null=True)),
        migrations.AddField(model_name="instanceattributes", name="workflow",
                            field=models.CharField(blank=True, editable=False, max_length=200, null=True)),
        migrations.AddField(model_name="instanceattributes", name="status",
                            field=models.CharField(blank=True, editable=False, max_length=24, null=True)),
        migrations.AddField(model_name="instanceattributes", name="created_at",
                            field=models.DateTimeField(blank=True, editable=False, null=True)),
        migrations.AddField(model_name="instanceattributes", name="started_at",
                            field=models.DateTimeField(blank=True, editable=False, null=True)),
        migrations.AddField(model_name="instanceattributes", name="ended_at",
                            field=models.DateTimeField(blank=True, editable=False, null=True)),
        migrations.RunPython(forwards, backwards),
    ]
