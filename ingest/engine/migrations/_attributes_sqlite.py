"""SQLite's triggers that keep the instance's list columns beside its search attributes
(engine_instance_attributes): 0019 creates them. SQLite drops a table's triggers when Django
rebuilds it (0013 says how), so a later migration that rebuilds `engine_instance` or
`engine_instance_attributes` on SQLite runs REBUILD after it."""

from __future__ import annotations

COLUMNS = ("tenant", "workflow", "status", "created_at", "started_at", "ended_at")
_SET = ", ".join(COLUMNS)
_CHANGED = " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in COLUMNS)

CREATE = [
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

DROP = [
    "DROP TRIGGER IF EXISTS engine_instance_attributes_copy",
    "DROP TRIGGER IF EXISTS engine_instance_attributes_follow",
]

BACKFILL = f"""UPDATE engine_instance_attributes SET ({_SET}) = (
    SELECT {_SET} FROM engine_instance i WHERE i.id = engine_instance_attributes.instance_id)"""

REBUILD = [*DROP, *CREATE, BACKFILL]
