"""`ingest_fact_put`: insert-or-supersede of one fact in one round trip on PostgreSQL.

Persisting a fact used to take seven or eight round trips inside a client-side transaction
(BEGIN, relax the commit, the conflict key's advisory lock, the existence check, the insert,
the rivals, the update, COMMIT), holding the advisory lock across all of them. The function
runs the same statements server-side as the call's own transaction, so the lock is held only
while PostgreSQL works. Each statement in it takes a fresh snapshot (READ COMMITTED), so the
rivals read after the lock include those committed by the writer that held it before: one
statement with CTEs could not do that, its snapshot predates the lock.

The Python side (`ingest.pipelines.services.fact_insert_or_supersede`) passes the authority ranks, so
the ranking rule is written once; SQLite runs the same rule through the ORM.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

COLUMNS = """id, tenant, subject, predicate, object, confidence, source_authority, source_ref, evidence,
        observed_at, ordinal, valid, superseded_by_id, instance_id, created_at, updated_at"""
VALUES = """p_id, p_tenant, p_subject, p_predicate, p_object, p_confidence, p_authority, p_source_ref,
        p_evidence, p_observed_at, p_ordinal, true, NULL, p_instance_id, p_now, p_now"""

CREATE = f"""
CREATE OR REPLACE FUNCTION ingest_fact_put(
    p_id varchar, p_tenant varchar, p_subject varchar, p_predicate varchar, p_object jsonb,
    p_confidence double precision, p_authority varchar, p_source_ref varchar, p_evidence text,
    p_observed_at timestamptz, p_ordinal integer, p_instance_id varchar, p_now timestamptz,
    p_single boolean, p_lock_key bigint, p_authorities text[], p_ranks integer[],
    OUT action text, OUT is_valid boolean, OUT superseded text[]
) LANGUAGE plpgsql AS $fn$
DECLARE
    winner varchar;
BEGIN
    -- Commit without waiting for the WAL flush: the engine's synchronous commit of the step's
    -- completion comes after and flushes this WAL too, so a fact is only ever lost together
    -- with its step's completion, and the step then writes it again (deterministic id).
    PERFORM set_config('synchronous_commit', 'off', true);
    superseded := '{{}}';
    IF NOT p_single THEN
        INSERT INTO ingest_fact ({COLUMNS}) VALUES ({VALUES}) ON CONFLICT (id) DO NOTHING;
        action := 'stored';
        is_valid := true;
        RETURN;
    END IF;
    -- Row locks cannot cover a rival that does not exist yet; this lock on the conflict key
    -- serialises the writers of one (tenant, subject, predicate).
    PERFORM pg_advisory_xact_lock(p_lock_key);
    SELECT f.valid INTO is_valid FROM ingest_fact f WHERE f.id = p_id;
    IF FOUND THEN
        action := 'unchanged';
        RETURN;
    END IF;
    INSERT INTO ingest_fact ({COLUMNS}) VALUES ({VALUES});
    SELECT f.id INTO winner FROM ingest_fact f
     WHERE f.tenant = p_tenant AND upper(f.subject) = upper(p_subject) AND f.predicate = p_predicate
       AND f.valid
     ORDER BY coalesce(p_ranks[array_position(p_authorities, f.source_authority::text)], 0) DESC,
              f.observed_at DESC, f.ordinal DESC, f.id COLLATE "C" DESC
     LIMIT 1;
    WITH lost AS (
        UPDATE ingest_fact f SET valid = false, superseded_by_id = winner, updated_at = p_now
         WHERE f.tenant = p_tenant AND upper(f.subject) = upper(p_subject) AND f.predicate = p_predicate
           AND f.valid AND f.id <> winner
        RETURNING f.id
    )
    SELECT coalesce(array_agg(lost.id::text ORDER BY lost.id COLLATE "C"), '{{}}') INTO superseded FROM lost;
    IF cardinality(superseded) = 0 THEN
        action := 'inserted';
        is_valid := true;
    ELSIF winner = p_id THEN
        action := 'superseded';
        is_valid := true;
    ELSE
        action := 'outranked';
        is_valid := false;
        superseded := '{{}}';
    END IF;
END
$fn$
"""

DROP = """
DROP FUNCTION IF EXISTS ingest_fact_put(varchar, varchar, varchar, varchar, jsonb, double precision, varchar,
    varchar, text, timestamptz, integer, varchar, timestamptz, boolean, bigint, text[], integer[])
"""


def create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0002_fact_ordinal"),
    ]

    operations = [
        migrations.RunPython(create, drop),
    ]
