"""On PostgreSQL, every transaction that appends to the history notifies `runledger_history`.

A statement-level trigger with a constant payload: PostgreSQL folds identical notifications of
one transaction into one, delivered at commit, so followers (the dashboard's live feed) wake
once per commit and read the new rows by id. SQLite followers poll instead.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION runledger_history_notify() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('runledger_history', '');
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS runledger_history_notify ON engine_history;
CREATE TRIGGER runledger_history_notify AFTER INSERT ON engine_history
    FOR EACH STATEMENT EXECUTE FUNCTION runledger_history_notify();
"""
DROP = """
DROP TRIGGER IF EXISTS runledger_history_notify ON engine_history;
DROP FUNCTION IF EXISTS runledger_history_notify();
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("engine", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
