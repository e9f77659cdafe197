"""Indexes for the claim's flow control (docs/flow-control.md).

- instance_claim_order: the fast path's ORDER BY priority DESC, ready_at as an index, so a claim
  reads `limit` rows of a large backlog instead of sorting all of it.
- instance_flow_ready: a limited workflow's runnable instances by key, in rank order.
- instance_flow_starts: a rate-limited group's starts in its window, counted from the ledger.

Raw SQL (same text on PostgreSQL and SQLite) with no model state: the claim's SQL lives in
sql.py and these indexes belong to it, not to the ORM's queries.
"""

from django.db import migrations

INDEXES = {
    "instance_claim_order": "(priority DESC, ready_at) WHERE ready_at IS NOT NULL",
    "instance_flow_ready": "(workflow, concurrency_key, priority DESC, ready_at) WHERE ready_at IS NOT NULL",
    "instance_flow_starts": "(workflow, concurrency_key, started_at) WHERE started_at IS NOT NULL",
}


class Migration(migrations.Migration):
    dependencies = [("engine", "0002_history_notify")]
    operations = [
        migrations.RunSQL(
            f"CREATE INDEX IF NOT EXISTS {name} ON engine_instance {spec}",
            f"DROP INDEX IF EXISTS {name}",
        )
        for name, spec in INDEXES.items()
    ]
