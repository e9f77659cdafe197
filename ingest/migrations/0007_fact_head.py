"""`ingest_fact_put` ranks a new fact against its key's head row, not against a scan of rivals.

Before, every single-valued write took the key's advisory lock, then found the rivals (the
valid facts of the same tenant, subject and predicate) and updated the losers, both by a query
over the facts. Each supersede flips `valid` on a fact, leaving a dead entry per flip in the
rivals' index, and the planner, with the statistics of a small table, could serve the query
from any index leading with the tenant: on the pipeline benchmark those two statements cost
0.5 to 1.9 ms each, 9,000 times per 1,000 calls, and which index a connection's cached plan
had picked decided whether PostgreSQL spent 12 or 30 ms of CPU per call.

Now the key's `ingest_facthead` row holds the current winner with its ranking (authority,
observed time, ordinal, id) and is the key's lock: the first writer of a key inserts it (the
others wait on that insert), later writers lock it FOR UPDATE. A write compares once, inserts
its fact valid or outranked, and, when it wins, updates the head and the loser by their keys.
Every lookup has one index that fits it. A head whose fact is gone or no longer valid, and a
new key, are resolved the old way, from the facts (the rivals query), under the head's lock.
A multi-valued write to a key that has a head (a Salesforce field named like a predicate the
LLM extracts as multi-valued) is ranked against the head: outranked, it is stored superseded
by the head's fact, which is what the next single-valued write of the key used to do to it.
Heads are created as keys are written; facts stored before this migration are ranked when
their key is next written.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models


# `INSERT_FACT` ends with the new fact's validity and what supersedes it: "{INSERT_FACT} true, NULL)".
INSERT_FACT = """INSERT INTO ingest_fact (id, tenant, subject, predicate, object, confidence, source_authority,
        source_ref, evidence, observed_at, ordinal, instance_id, created_at, updated_at, valid, superseded_by_id)
    VALUES (p_id, p_tenant, p_subject, p_predicate, p_object, p_confidence, p_authority, p_source_ref, p_evidence,
        p_observed_at, p_ordinal, p_instance_id, p_now, p_now,"""
# What `_rank` (ingest/pipelines/fact_writes.py) ranks by, for the new fact and for the key's head.
RANK_NEW = """(coalesce(p_ranks[array_position(p_authorities, p_authority::text)], 0), p_observed_at, p_ordinal,
                p_id COLLATE "C")"""
RANK_HEAD = """(coalesce(p_ranks[array_position(p_authorities, head.source_authority::text)], 0), head.observed_at,
                head.ordinal, head.fact_id COLLATE "C")"""
KEY = "h.tenant = p_tenant AND h.subject_key = upper(p_subject) AND h.predicate = p_predicate"

CREATE = f"""
CREATE FUNCTION ingest_fact_put(
    p_id varchar, p_tenant varchar, p_subject varchar, p_predicate varchar, p_object jsonb,
    p_confidence double precision, p_authority varchar, p_source_ref varchar, p_evidence text,
    p_observed_at timestamptz, p_ordinal integer, p_instance_id varchar, p_now timestamptz,
    p_single boolean, p_authorities text[], p_ranks integer[],
    OUT action text, OUT is_valid boolean, OUT superseded text[]
) LANGUAGE plpgsql SET enable_seqscan = off AS $fn$
DECLARE
    head record;
    head_valid boolean;
    existed boolean;
    w record;
BEGIN
    -- Commit without waiting for the WAL flush: the engine's synchronous commit of the step's
    -- completion comes after and flushes this WAL too, so a fact is only ever lost together
    -- with its step's completion, and the step then writes it again (deterministic id).
    PERFORM set_config('synchronous_commit', 'off', true);
    superseded := '{{}}';
    IF NOT p_single THEN
        -- Multi-valued facts accumulate, unless a single-valued writer holds the key (a
        -- Salesforce field named like a predicate the LLM extracts): a fact its head outranks
        -- is stored superseded by it, as the next single-valued write would have left it.
        SELECT h.fact_id, h.source_authority, h.observed_at, h.ordinal INTO head
          FROM ingest_facthead h WHERE {KEY};
        IF FOUND THEN
            SELECT f.valid INTO head_valid FROM ingest_fact f WHERE f.id = head.fact_id;
        END IF;
        IF head_valid AND {RANK_NEW} < {RANK_HEAD} THEN
            {INSERT_FACT} false, head.fact_id)
                ON CONFLICT (id) DO NOTHING;
            IF FOUND THEN
                action := 'outranked';
                is_valid := false;
            ELSE
                SELECT f.valid INTO is_valid FROM ingest_fact f WHERE f.id = p_id;
                action := 'unchanged';
            END IF;
            RETURN;
        END IF;
        {INSERT_FACT} true, NULL)
            ON CONFLICT (id) DO NOTHING;
        action := 'stored';
        is_valid := true;
        RETURN;
    END IF;
    -- The head row is the key's lock. A new key's head is inserted (its other writers wait on
    -- this insert) and resolved below; an existing one is locked.
    INSERT INTO ingest_facthead AS h (tenant, subject_key, predicate, fact_id, source_authority, observed_at,
                                      ordinal, updated_at)
    VALUES (p_tenant, upper(p_subject), p_predicate, p_id, p_authority, p_observed_at, p_ordinal, p_now)
    ON CONFLICT (tenant, subject_key, predicate) DO NOTHING;
    IF NOT FOUND THEN
        SELECT h.fact_id, h.source_authority, h.observed_at, h.ordinal INTO head
          FROM ingest_facthead h WHERE {KEY} FOR UPDATE;
        SELECT f.valid INTO head_valid FROM ingest_fact f WHERE f.id = head.fact_id;
        IF head_valid AND head.fact_id = p_id THEN
            action := 'unchanged';
            is_valid := true;
            RETURN;
        ELSIF head_valid THEN
            IF {RANK_NEW} > {RANK_HEAD} THEN
                {INSERT_FACT} true, NULL)
                    ON CONFLICT (id) DO NOTHING;
                IF FOUND THEN
                    UPDATE ingest_facthead h SET fact_id = p_id, source_authority = p_authority,
                           observed_at = p_observed_at, ordinal = p_ordinal, updated_at = p_now
                     WHERE {KEY};
                    UPDATE ingest_fact f SET valid = false, superseded_by_id = p_id, updated_at = p_now
                     WHERE f.id = head.fact_id;
                    action := 'superseded';
                    is_valid := true;
                    superseded := ARRAY[head.fact_id::text];
                    RETURN;
                END IF;
            ELSE
                {INSERT_FACT} false, head.fact_id)
                    ON CONFLICT (id) DO NOTHING;
                IF FOUND THEN
                    action := 'outranked';
                    is_valid := false;
                    RETURN;
                END IF;
            END IF;
            -- Stored before (a step running again): as it is.
            SELECT f.valid INTO is_valid FROM ingest_fact f WHERE f.id = p_id;
            action := 'unchanged';
            RETURN;
        END IF;
    END IF;
    -- A new key, or a head whose fact is gone or no longer valid: rank all the key's valid
    -- facts, as before heads, and point the head at the winner.
    SELECT f.valid INTO is_valid FROM ingest_fact f WHERE f.id = p_id;
    existed := FOUND;
    IF NOT existed THEN
        {INSERT_FACT} true, NULL);
    END IF;
    SELECT f.id, f.source_authority, f.observed_at, f.ordinal INTO w FROM ingest_fact f
     WHERE f.tenant = p_tenant AND upper(f.subject) = upper(p_subject) AND f.predicate = p_predicate
       AND f.valid
     ORDER BY coalesce(p_ranks[array_position(p_authorities, f.source_authority::text)], 0) DESC,
              f.observed_at DESC, f.ordinal DESC, f.id COLLATE "C" DESC
     LIMIT 1;
    IF w.id IS NULL THEN
        -- Nothing valid (the fact was stored before, outranked by a fact deleted since).
        DELETE FROM ingest_facthead h WHERE {KEY};
        action := 'unchanged';
        RETURN;
    END IF;
    UPDATE ingest_facthead h SET fact_id = w.id, source_authority = w.source_authority, observed_at = w.observed_at,
           ordinal = w.ordinal, updated_at = p_now
     WHERE {KEY};
    WITH lost AS (
        UPDATE ingest_fact f SET valid = false, superseded_by_id = w.id, updated_at = p_now
         WHERE f.tenant = p_tenant AND upper(f.subject) = upper(p_subject) AND f.predicate = p_predicate
           AND f.valid AND f.id <> w.id
        RETURNING f.id
    )
    SELECT coalesce(array_agg(lost.id::text ORDER BY lost.id COLLATE "C"), '{{}}') INTO superseded FROM lost;
    IF existed THEN
        SELECT f.valid INTO is_valid FROM ingest_fact f WHERE f.id = p_id;
        action := 'unchanged';
        superseded := '{{}}';
    ELSIF cardinality(superseded) = 0 THEN
        action := 'inserted';
        is_valid := true;
    ELSIF w.id = p_id THEN
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

NEW = """ingest_fact_put(varchar, varchar, varchar, varchar, jsonb, double precision, varchar, varchar, text,
    timestamptz, integer, varchar, timestamptz, boolean, text[], integer[])"""
OLD = """ingest_fact_put(varchar, varchar, varchar, varchar, jsonb, double precision, varchar, varchar, text,
    timestamptz, integer, varchar, timestamptz, boolean, bigint, text[], integer[])"""


def forward(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP FUNCTION IF EXISTS {OLD}")
        schema_editor.execute(CREATE)


def backward(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        from importlib import import_module

        previous = import_module("ingest.migrations.0003_fact_put_function")
        schema_editor.execute(f"DROP FUNCTION IF EXISTS {NEW}")
        schema_editor.execute(previous.CREATE)
        schema_editor.execute(f"ALTER FUNCTION {OLD} SET enable_seqscan = off")


class Migration(migrations.Migration):

    dependencies = [
        ('ingest', '0006_fact_superseded_by_immediate'),
    ]

    operations = [
        migrations.CreateModel(
            name='FactHead',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('tenant', models.CharField(max_length=100)),
                ('subject_key', models.CharField(help_text='the subject in upper case: subjects match in any case', max_length=300)),
                ('predicate', models.CharField(max_length=100)),
                ('fact_id', models.CharField(help_text='the valid fact of the key', max_length=32)),
                ('source_authority', models.CharField(choices=[('GongEngagement', 'Gong call (engagement only)'), ('GongCall', 'Gong call transcript'), ('SfdcFreeText', 'Salesforce free text'), ('SfdcCustomField', 'Salesforce field'), ('SfdcOpportunityStage', 'Salesforce opportunity stage fields')], max_length=30)),
                ('observed_at', models.DateTimeField()),
                ('ordinal', models.IntegerField()),
                ('updated_at', models.DateTimeField()),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('tenant', 'subject_key', 'predicate'), name='fact_head_key')],
            },
        ),
        migrations.RunPython(forward, backward),
    ]
