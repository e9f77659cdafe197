"""engine_instance_attribute_values: one row per (instance, search attribute), with the copy of
the instance's list columns, kept by triggers on engine_instance_attributes, and a covering btree
on (key, value, tenant, status) so an attribute filter on the instances list is an index-only
read of one (key, value)'s entries.

Why (issue 19): after 0019, `?workflow=ingest&status=complete&attr=domain:d7.example&sort=-duration`
over 1 M instances read ~10,000 attribute rows found through the GIN index, one heap page each
(7,878 buffers): 15 ms when they are cached, but shared_buffers (128 MB here) does not keep a
150 MB table warm beside the rest of the ledger, and the p99 of three runs was 148, 133 and
180 ms against the 150 ms goal. The same 10,000 entries side by side in the covering index are
about 150 pages. Figures in docs/bulk-actions.md.

The triggers (PostgreSQL here, SQLite in _attributes_sqlite) fire on engine_instance_attributes,
whose own triggers (0019) follow the instance: so the chain is instance update -> attributes row
-> value rows, all in the change's transaction:
- insert of an attributes row: its keys' rows, with the copy the BEFORE INSERT trigger of 0019
  filled under FOR SHARE;
- update of `attributes`: the rows anew (attributes change rarely: once or twice per run);
- update of a copied column only: the instance's rows (a primary-key prefix probe);
- delete: the rows go with it (retention deletes attribute rows through Django's cascade).
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

from ingest.engine.migrations import _attributes_sqlite

_COLS = _attributes_sqlite.COLUMNS
_SET = ", ".join(_COLS)
_NEW = ", ".join(f"NEW.{c}" for c in _COLS)

PG_FORWARDS = f"""
CREATE FUNCTION engine_instance_attribute_values_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM engine_instance_attribute_values WHERE instance_id = OLD.instance_id;
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.attributes IS NOT DISTINCT FROM NEW.attributes THEN
        UPDATE engine_instance_attribute_values SET ({_SET}) = ({_NEW}) WHERE instance_id = NEW.instance_id;
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM engine_instance_attribute_values WHERE instance_id = NEW.instance_id;
    END IF;
    INSERT INTO engine_instance_attribute_values (instance_id, key, value, {_SET})
        SELECT NEW.instance_id, e.key, e.value, {_NEW} FROM jsonb_each_text(NEW.attributes) e;
    RETURN NULL;
END $$;
CREATE TRIGGER engine_instance_attribute_values_insert AFTER INSERT ON engine_instance_attributes
    FOR EACH ROW EXECUTE FUNCTION engine_instance_attribute_values_follow();
CREATE TRIGGER engine_instance_attribute_values_update AFTER UPDATE ON engine_instance_attributes
    FOR EACH ROW WHEN (OLD.attributes IS DISTINCT FROM NEW.attributes OR
                       {" OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in _COLS)})
    EXECUTE FUNCTION engine_instance_attribute_values_follow();
CREATE TRIGGER engine_instance_attribute_values_delete AFTER DELETE ON engine_instance_attributes
    FOR EACH ROW EXECUTE FUNCTION engine_instance_attribute_values_follow();
INSERT INTO engine_instance_attribute_values (instance_id, key, value, {_SET})
    SELECT a.instance_id, e.key, e.value, {", ".join(f"a.{c}" for c in _COLS)}
    FROM engine_instance_attributes a, jsonb_each_text(a.attributes) e;
"""
PG_BACKWARDS = """
DROP TRIGGER IF EXISTS engine_instance_attribute_values_insert ON engine_instance_attributes;
DROP TRIGGER IF EXISTS engine_instance_attribute_values_update ON engine_instance_attributes;
DROP TRIGGER IF EXISTS engine_instance_attribute_values_delete ON engine_instance_attributes;
DROP FUNCTION IF EXISTS engine_instance_attribute_values_follow();
"""


def forwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_FORWARDS)
        return
    for statement in [*_attributes_sqlite.VALUES_CREATE, *_attributes_sqlite.VALUES_BACKFILL]:
        schema_editor.execute(statement)


def backwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_BACKWARDS)
        return
    for statement in _attributes_sqlite.VALUES_DROP:
        schema_editor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ("engine", "0019_attributes_carry_list_columns"),
    ]

    operations = [
        migrations.CreateModel(
            name="InstanceAttributeValue",
            fields=[
                ("pk", models.CompositePrimaryKey("instance_id", "key", blank=True, editable=False, primary_key=True,
                                                  serialize=False)),
                ("instance_id", models.CharField(editable=False, max_length=100)),
                ("key", models.CharField(editable=False, max_length=40)),
                ("value", models.CharField(editable=False, max_length=200)),
                ("tenant", models.CharField(blank=True, editable=False, max_length=100, null=True)),
                ("workflow", models.CharField(blank=True, editable=False, max_length=200, null=True)),
                ("status", models.CharField(blank=True, editable=False, max_length=24, null=True)),
                ("created_at", models.DateTimeField(blank=True, editable=False, null=True)),
                ("started_at", models.DateTimeField(blank=True, editable=False, null=True)),
                ("ended_at", models.DateTimeField(blank=True, editable=False, null=True)),
            ],
            options={
                "db_table": "engine_instance_attribute_values",
                "indexes": [models.Index(fields=["key", "value", "tenant", "status"],
                                         include=("workflow", "created_at", "started_at", "ended_at", "instance_id"),
                                         name="instance_attribute_value_list")],
            },
        ),
        migrations.RunPython(forwards, backwards),
    ]
