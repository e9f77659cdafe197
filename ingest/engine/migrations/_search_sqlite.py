"""SQLite's params-search triggers: 0006 creates them, and 0013 puts them back after a table
rebuild dropped them."""

from __future__ import annotations

# SQLite stores JSON with non-ASCII characters escaped (\u00fc): the text is the JSON followed by
# its string values decoded, one per line, so "Müller" is found as it is written.
SQLITE_TEXT = """{params} || char(10) || coalesce(
    (SELECT group_concat(atom, char(10)) FROM json_tree({params}) WHERE type = 'text'), '')"""
CREATE = [
    f"""CREATE TRIGGER engine_instance_search_insert AFTER INSERT ON engine_instance BEGIN
        INSERT OR REPLACE INTO engine_instance_search (instance_id, text)
        VALUES (NEW.id, {SQLITE_TEXT.format(params="NEW.params")});
    END""",
    f"""CREATE TRIGGER engine_instance_search_update AFTER UPDATE OF params ON engine_instance
    WHEN OLD.params IS NOT NEW.params BEGIN
        INSERT OR REPLACE INTO engine_instance_search (instance_id, text)
        VALUES (NEW.id, {SQLITE_TEXT.format(params="NEW.params")});
    END""",
]

REBUILD = [
    "DROP TRIGGER IF EXISTS engine_instance_search_insert",
    "DROP TRIGGER IF EXISTS engine_instance_search_update",
    *CREATE,
    f"""INSERT OR IGNORE INTO engine_instance_search (instance_id, text)
        SELECT id, {SQLITE_TEXT.format(params="params")} FROM engine_instance""",
]
