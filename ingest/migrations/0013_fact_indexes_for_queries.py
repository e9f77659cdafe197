"""Two index entries fewer per fact written: each fact's insert wrote five index entries, now three.

- `fact_tenant_pred_valid` (tenant, predicate, valid) served no query: the facts are listed by
  tenant, validity and source (`fact_list`: `fact_tenant_source`, or `fact_rivals` for the
  valid ones), and a key's rivals are found through `fact_rivals`.
- The index Django gives the `superseded_by` foreign key held every fact, though only the
  superseded and the outranked ones have a `superseded_by`. It serves the look-ups of a deleted
  fact's losers (PostgreSQL's check of the reference and Django's SET NULL), which ask for a
  value, never for NULL: a partial index of the facts that have one serves them, and a valid
  fact's insert writes nothing to it.

Django does not model a foreign key's deferrability (migration 0006), and an AlterField on
`superseded_by` would recreate the constraint deferred: the state changes apart from the
statements, which only drop and create indexes, by introspection on either database.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

PARTIAL = "CREATE INDEX fact_superseded_by ON ingest_fact (superseded_by_id) WHERE superseded_by_id IS NOT NULL"


def _full_superseded_by_indexes(schema_editor: Any) -> list[str]:
    """The names of the plain (not partial, not constraint) indexes on `superseded_by_id` alone."""
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "ingest_fact")
    return [
        name
        for name, info in constraints.items()
        if info["index"] and info["columns"] == ["superseded_by_id"] and name != "fact_superseded_by"
    ]


def forward(apps: Any, schema_editor: Any) -> None:
    for name in _full_superseded_by_indexes(schema_editor):
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")
    schema_editor.execute(PARTIAL)
    schema_editor.execute("DROP INDEX IF EXISTS fact_tenant_pred_valid")


def backward(apps: Any, schema_editor: Any) -> None:
    schema_editor.execute("DROP INDEX IF EXISTS fact_superseded_by")
    schema_editor.execute("CREATE INDEX ingest_fact_superseded_by_id_7a97c870 ON ingest_fact (superseded_by_id)")
    schema_editor.execute("CREATE INDEX fact_tenant_pred_valid ON ingest_fact (tenant, predicate, valid)")


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0012_facts_put_set"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="fact", name="fact_tenant_pred_valid"),
                migrations.AlterField(
                    model_name="fact",
                    name="superseded_by",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=models.deletion.SET_NULL,
                        related_name="supersedes",
                        to="ingest.fact",
                    ),
                ),
                migrations.AddIndex(
                    model_name="fact",
                    index=models.Index(
                        fields=["superseded_by"],
                        name="fact_superseded_by",
                        condition=models.Q(superseded_by__isnull=False),
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(forward, backward)],
        ),
    ]
