"""`ingest_facts_put`: a call's facts written in one function call, one transaction.

A Gong call extracts about 18 facts, and each was its own `ingest_fact_put` round trip and its
own transaction: 18 statements to parse and bind, 18 commits, 18 waits of the worker's thread.
`ingest_facts_put` takes the batch as one JSON array and answers one row per fact, in order.

- The multi-valued facts of keys that have no head, and that no single-valued fact of the batch
  writes, are inserted by one `INSERT … SELECT` (most of a call's facts): the rule stores them
  valid, whatever else the batch holds, since only a head ranks a multi-valued fact.
- Every other fact goes through `ingest_fact_put`, in the batch's order, so a single-valued
  fact and a later fact of its key resolve as they did one call at a time.

Both sets touch disjoint keys, so which runs first changes no answer. The rule itself is
unchanged (migration 0007); tests/ingest/test_fact_rule_paths.py holds the batch to the answers
of the one-at-a-time writes on both databases.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

COLUMNS = """id varchar, tenant varchar, subject varchar, predicate varchar, object jsonb,
        confidence double precision, source_authority varchar, source_ref varchar, evidence text,
        observed_at timestamptz, ordinal integer, instance_id varchar, single boolean"""
NAMES = """id, tenant, subject, predicate, object, confidence, source_authority, source_ref, evidence, observed_at,
        ordinal, instance_id, single"""
# The batch, one row per fact with its position `n` (1, 2, …).
BATCH = f"ROWS FROM (jsonb_to_recordset(p_facts) AS ({COLUMNS})) WITH ORDINALITY AS b({NAMES}, n)"

CREATE = f"""
CREATE FUNCTION ingest_facts_put(p_facts jsonb, p_now timestamptz, p_authorities text[], p_ranks integer[])
RETURNS TABLE (n integer, action text, is_valid boolean, superseded text[])
LANGUAGE plpgsql SET enable_seqscan = off AS $fn$
DECLARE
    free bigint[];
    f record;
    w record;
BEGIN
    -- As in ingest_fact_put: the step's synchronous completion, committed after, flushes this WAL.
    PERFORM set_config('synchronous_commit', 'off', true);
    WITH b AS (SELECT * FROM {BATCH}),
    free_facts AS (
        SELECT b.* FROM b
         WHERE NOT b.single
           AND NOT EXISTS (SELECT 1 FROM b s
                            WHERE s.single AND s.tenant = b.tenant AND upper(s.subject) = upper(b.subject)
                              AND s.predicate = b.predicate)
           AND NOT EXISTS (SELECT 1 FROM ingest_facthead h
                            WHERE h.tenant = b.tenant AND h.subject_key = upper(b.subject)
                              AND h.predicate = b.predicate)
    ),
    stored AS (
        INSERT INTO ingest_fact (id, tenant, subject, predicate, object, confidence, source_authority, source_ref,
                                 evidence, observed_at, ordinal, instance_id, created_at, updated_at, valid,
                                 superseded_by_id)
        SELECT x.id, x.tenant, x.subject, x.predicate, x.object, x.confidence, x.source_authority, x.source_ref,
               x.evidence, x.observed_at, x.ordinal, x.instance_id, p_now, p_now, true, NULL
          FROM free_facts x ORDER BY x.n
        ON CONFLICT (id) DO NOTHING
    )
    SELECT coalesce(array_agg(x.n), '{{}}') INTO free FROM free_facts x;
    FOR f IN SELECT * FROM {BATCH} ORDER BY b.n LOOP
        n := f.n;
        IF f.n = ANY (free) THEN
            action := 'stored';
            is_valid := true;
            superseded := '{{}}';
        ELSE
            SELECT * INTO w FROM ingest_fact_put(f.id, f.tenant, f.subject, f.predicate, f.object, f.confidence,
                f.source_authority, f.source_ref, f.evidence, f.observed_at, f.ordinal, f.instance_id, p_now,
                f.single, p_authorities, p_ranks);
            action := w.action;
            is_valid := w.is_valid;
            superseded := w.superseded;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$fn$
"""
DROP = "DROP FUNCTION IF EXISTS ingest_facts_put(jsonb, timestamptz, text[], integer[])"


def forward(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def backward(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0011_connection_kinds_and_tests"),
    ]

    operations = [
        migrations.RunPython(forward, backward),
    ]
