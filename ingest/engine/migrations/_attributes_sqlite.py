"""SQLite's triggers that keep the instance's list columns beside its search attributes
(engine_instance_attributes, 0019) and the rows of one attribute each
(engine_instance_attribute_values, 0020). SQLite drops a table's triggers when Django rebuilds
it (0013 says how), so a later migration that rebuilds `engine_instance`,
`engine_instance_attributes` or `engine_instance_attribute_values` on SQLite runs REBUILD after
it. The `_0019` lists are what 0019 created, kept as they were so that migration still means
what it meant."""

from __future__ import annotations

COLUMNS = ("tenant", "workflow", "status", "created_at", "started_at", "ended_at")
_SET = ", ".join(COLUMNS)
_CHANGED = " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in COLUMNS)

CREATE_0019 = [
    # On the attributes row's insert: the instance's columns as they are now. SQLite has one
    # writer at a time, so no instance update can slip between this copy and the commit.
    f"""CREATE TRIGGER engine_instance_attributes_copy AFTER INSERT ON engine_instance_attributes BEGIN
        UPDATE engine_instance_attributes SET ({_SET}) = (
            SELECT {_SET} FROM engine_instance WHERE id = NEW.instance_id)
        WHERE instance_id = NEW.instance_id;
    END""",
    # On an instance update that changes one of them: the row here, if the instance has one.
    f"""CREATE TRIGGER engine_instance_attributes_follow AFTER UPDATE OF {_SET} ON engine_instance
    WHEN {_CHANGED} BEGIN
        UPDATE engine_instance_attributes SET ({_SET}) = ({", ".join(f"NEW.{c}" for c in COLUMNS)})
        WHERE instance_id = NEW.id;
    END""",
]

DROP_0019 = [
    "DROP TRIGGER IF EXISTS engine_instance_attributes_copy",
    "DROP TRIGGER IF EXISTS engine_instance_attributes_follow",
]

BACKFILL_0019 = f"""UPDATE engine_instance_attributes SET ({_SET}) = (
    SELECT {_SET} FROM engine_instance i WHERE i.id = engine_instance_attributes.instance_id)"""

REBUILD_0019 = [*DROP_0019, *CREATE_0019, BACKFILL_0019]

# One row per key: written from the instance's own row (not NEW's copy, which the copy trigger
# above may not have filled yet: SQLite does not promise an order between two triggers).
_VALUES_OF_NEW = f"""INSERT INTO engine_instance_attribute_values (instance_id, key, value, {_SET})
        SELECT NEW.instance_id, j.key, CAST(j.value AS TEXT), {", ".join(f"i.{c}" for c in COLUMNS)}
        FROM json_each(NEW.attributes) j LEFT JOIN engine_instance i ON i.id = NEW.instance_id;"""

VALUES_CREATE = [
    f"""CREATE TRIGGER engine_instance_attribute_values_insert AFTER INSERT ON engine_instance_attributes BEGIN
        {_VALUES_OF_NEW}
    END""",
    f"""CREATE TRIGGER engine_instance_attribute_values_reset AFTER UPDATE OF attributes
    ON engine_instance_attributes WHEN OLD.attributes IS NOT NEW.attributes BEGIN
        DELETE FROM engine_instance_attribute_values WHERE instance_id = NEW.instance_id;
        {_VALUES_OF_NEW}
    END""",
    f"""CREATE TRIGGER engine_instance_attribute_values_follow AFTER UPDATE OF {_SET}
    ON engine_instance_attributes WHEN {_CHANGED} BEGIN
        UPDATE engine_instance_attribute_values SET ({_SET}) = ({", ".join(f"NEW.{c}" for c in COLUMNS)})
        WHERE instance_id = NEW.instance_id;
    END""",
    """CREATE TRIGGER engine_instance_attribute_values_delete AFTER DELETE ON engine_instance_attributes BEGIN
        DELETE FROM engine_instance_attribute_values WHERE instance_id = OLD.instance_id;
    END""",
]

VALUES_DROP = [
    "DROP TRIGGER IF EXISTS engine_instance_attribute_values_insert",
    "DROP TRIGGER IF EXISTS engine_instance_attribute_values_reset",
    "DROP TRIGGER IF EXISTS engine_instance_attribute_values_follow",
    "DROP TRIGGER IF EXISTS engine_instance_attribute_values_delete",
]

VALUES_BACKFILL = [
    "DELETE FROM engine_instance_attribute_values",
    f"""INSERT INTO engine_instance_attribute_values (instance_id, key, value, {_SET})
        SELECT a.instance_id, j.key, CAST(j.value AS TEXT), {", ".join(f"a.{c}" for c in COLUMNS)}
        FROM engine_instance_attributes a, json_each(a.attributes) j""",
]

CREATE = [*CREATE_0019, *VALUES_CREATE]
DROP = [*DROP_0019, *VALUES_DROP]
REBUILD = [*DROP, *CREATE, BACKFILL_0019, *VALUES_BACKFILL]
