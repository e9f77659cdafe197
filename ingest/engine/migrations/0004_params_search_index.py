"""A trigram index for the instance list's "text in params" filter (PostgreSQL).

The dashboard filters with `params::text ILIKE '%…%'` (Django's icontains on a cast), which no
B-tree can serve: over a million instances it scanned the table (~470 ms). A GIN trigram index
on the same expression serves it. Where the pg_trgm extension cannot be created (no privilege
on a managed server) the filter still works, unindexed, and the migration says so.
"""

from django.db import migrations

EXPRESSION = "(UPPER((params)::text))"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'")
        if cursor.fetchone() is None:
            print("\n  pg_trgm is not available: the params text filter stays unindexed")
            return
        cursor.execute("SAVEPOINT trgm")
        try:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        except Exception as exc:  # noqa: BLE001 - no privilege on a managed server
            cursor.execute("ROLLBACK TO SAVEPOINT trgm")
            print(f"\n  could not create pg_trgm ({exc}); the params text filter stays unindexed")
            return
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS instance_params_trgm ON engine_instance USING gin ({EXPRESSION} gin_trgm_ops)"
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS instance_params_trgm")


class Migration(migrations.Migration):
    dependencies = [("engine", "0003_flow_control")]
    operations = [migrations.RunPython(forwards, backwards)]
