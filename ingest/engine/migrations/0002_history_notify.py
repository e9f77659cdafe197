"""No NOTIFY trigger on the history table.

An earlier build notified `runledger_history` from an AFTER INSERT trigger. PostgreSQL holds its
global notification lock from a notifying transaction's pre-commit through its WAL flush, so
every worker's commits queued behind each other. Notifications are now sent after commit by
`ingest.engine.notify`; this migration removes the trigger where an earlier build created it.
"""

from django.db import migrations

DROP = """
DROP TRIGGER IF EXISTS runledger_history_notify ON engine_history;
DROP FUNCTION IF EXISTS runledger_history_notify();
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("engine", "0001_initial")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
