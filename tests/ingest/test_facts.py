"""Facts: deterministic ids, insert-or-supersede, embeddings and similarity search."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.extraction import Fact as Extracted
from ingest.pipelines.fact_writes import fact_id_for, fact_insert_or_supersede
from ingest.pipelines.models import Fact, FactEmbedding, FactHead, SignalEvaluation
from ingest.pipelines.selectors import fact_similar
from ingest.pipelines.services import fact_embeddings_store, signal_evaluation_record
from ingest.workflows import gong_ingest_start
from ingest.workflows.providers import embedder

pytestmark = [pytest.mark.db, pytest.mark.django_db]
T0 = datetime(2025, 3, 3, 15, tzinfo=UTC)


def put(obj: str, *, source: str, authority: str = "GongCall", at: datetime = T0, predicate: str = "budget"):
    return fact_insert_or_supersede(
        tenant="acme",
        fact=Extracted("Acme", predicate, obj, 0.8, "said so"),
        source_ref=source,
        authority=authority,
        observed_at=at,
    )


def test_the_same_fact_from_the_same_source_is_stored_once() -> None:
    first, again = put("USD 50000", source="gong:call:1"), put("USD 50000", source="gong:call:1")
    assert (
        first.id
        == again.id
        == fact_id_for(tenant="acme", source_ref="gong:call:1", fact=Extracted("acme", "budget", "usd 50000", 0.1))
    )
    assert (first.action, again.action) == ("inserted", "unchanged")  # budget: single-valued
    assert Fact.objects.count() == 1


def test_a_newer_observation_supersedes_an_older_one_whatever_the_processing_order() -> None:
    newer = put("USD 80000", source="gong:call:2", at=T0 + timedelta(days=7))
    older = put("USD 50000", source="gong:call:1", at=T0)  # a late redelivery of an older call
    assert (newer.action, older.action) == ("inserted", "outranked")
    assert Fact.objects.get(id=older.id).superseded_by_id == newer.id
    assert list(Fact.objects.filter(valid=True).values_list("object", flat=True)) == ["USD 80000"]


def test_salesforce_stage_fields_outrank_what_a_call_suggests() -> None:
    crm = put(
        "Proposal/Price Quote", source="sfdc:Opportunity:006", authority="SfdcOpportunityStage", predicate="deal_stage"
    )
    call = put("Negotiation/Review", source="gong:call:3", at=T0 + timedelta(days=1), predicate="deal_stage")
    assert call.action == "outranked" and Fact.objects.get(id=crm.id).valid


def test_multi_valued_predicates_accumulate() -> None:
    put("Clari", source="gong:call:1", predicate="competitor_mentioned")
    put("Outreach", source="gong:call:2", predicate="competitor_mentioned")
    assert Fact.objects.filter(valid=True).count() == 2


def test_a_second_call_supersedes_the_budget_of_the_first_through_the_pipeline(openai_tenant: str, drain) -> None:
    gong_ingest_start(
        "acme",
        {"id": "1", "started": T0.isoformat(), "account": "Acme"},
        transcript="Dana Whitfield: Our budget is $50k this year.",
    )
    gong_ingest_start(
        "acme",
        {"id": "2", "started": (T0 + timedelta(days=3)).isoformat(), "account": "Acme"},
        transcript="Dana Whitfield: Good news, our budget is now $75k.",
    )
    drain()
    budgets = {f.object: f for f in Fact.objects.filter(predicate="budget")}
    assert budgets["USD 75000"].valid and not budgets["USD 50000"].valid
    assert budgets["USD 50000"].superseded_by_id == budgets["USD 75000"].id


def test_committed_facts_are_embedded_and_found_by_similarity(openai_tenant: str, with_embeddings: None, drain) -> None:
    started = gong_ingest_start(
        "acme",
        {"id": "8", "account": "Acme"},
        transcript=(
            "Dana Whitfield: Our budget is $120k. We are also evaluating Clari.\n"
            "Maya Chen: I'll send the revised proposal by Friday."
        ),
    )
    drain()
    assert FactEmbedding.objects.filter(tenant="acme").count() == Fact.objects.filter(tenant="acme").count() > 2
    query = embedder().embed(["Acme competitor mentioned: Clari"]).vectors[0]
    best = fact_similar(tenant="acme", vector=query, limit=3)
    assert "Clari" in best[0].text and best[0].score > best[-1].score
    assert fact_similar(tenant="globex", vector=query) == []
    assert started.created


def test_within_one_call_the_later_statement_wins_whatever_order_the_facts_land_in(openai_tenant: str, drain) -> None:
    gong_ingest_start(
        "acme",
        {"id": "11", "account": "Acme"},
        transcript=(
            "Dana Whitfield: Our budget is $50k.\nSam Okafor: Correction, after the board meeting our budget is $65k."
        ),
    )
    drain()
    valid = Fact.objects.get(predicate="budget", valid=True)
    assert valid.object == "USD 65000"
    assert Fact.objects.get(predicate="budget", valid=False).superseded_by_id == valid.id


def test_a_newer_fact_names_the_facts_it_superseded_and_a_repeat_keeps_the_stored_validity() -> None:
    older = put("USD 50000", source="gong:call:1", at=T0)
    newer = put("USD 80000", source="gong:call:2", at=T0 + timedelta(days=7))
    assert (newer.action, newer.valid, newer.superseded) == ("superseded", True, (older.id,))
    again = put("USD 50000", source="gong:call:1", at=T0)
    assert (again.action, again.valid, again.superseded) == ("unchanged", False, ())
    assert Fact.objects.get(id=older.id).superseded_by_id == newer.id


def test_a_tie_on_authority_and_time_goes_to_the_later_statement_of_the_batch() -> None:
    first = fact_insert_or_supersede(
        tenant="acme",
        fact=Extracted("Acme", "budget", "USD 50000", 0.8, "said"),
        source_ref="gong:call:5",
        authority="GongCall",
        observed_at=T0,
        ordinal=4,
    )
    later = fact_insert_or_supersede(
        tenant="acme",
        fact=Extracted("ACME", "budget", "USD 65000", 0.8, "said"),
        source_ref="gong:call:5",
        authority="GongCall",
        observed_at=T0,
        ordinal=2,
    )
    assert (first.action, later.action) == ("inserted", "outranked")  # ordinal 4 beats 2; subjects match any case
    assert Fact.objects.get(id=later.id).superseded_by_id == first.id


def test_facts_of_other_tenants_subjects_or_multi_valued_predicates_are_no_rivals() -> None:
    put("USD 50000", source="gong:call:1")
    other_tenant = fact_insert_or_supersede(
        tenant="globex",
        fact=Extracted("Acme", "budget", "USD 1", 0.8),
        source_ref="gong:call:1",
        authority="GongCall",
        observed_at=T0,
    )
    other_subject = fact_insert_or_supersede(
        tenant="acme",
        fact=Extracted("Initech", "budget", "USD 2", 0.8),
        source_ref="gong:call:1",
        authority="GongCall",
        observed_at=T0,
    )
    many = put("Clari", source="gong:call:1", predicate="competitor_mentioned")
    assert [w.action for w in (other_tenant, other_subject, many)] == ["inserted", "inserted", "stored"]
    assert Fact.objects.filter(valid=True).count() == 4


def head() -> tuple[str, str, str]:
    row = FactHead.objects.get(tenant="acme", predicate="budget")
    return row.subject_key, row.fact_id, row.source_authority


def test_the_key_head_follows_the_winner_and_a_repeat_of_the_winner_changes_nothing() -> None:
    first = put("USD 50000", source="gong:call:1", at=T0)
    assert head() == ("ACME", first.id, "GongCall")
    weaker = put("USD 10", source="gong:call:0", at=T0 - timedelta(days=1))
    stronger = put("USD 90000", source="sfdc:Opportunity:1", authority="SfdcCustomField", at=T0 - timedelta(days=9))
    assert (weaker.action, stronger.action, stronger.superseded) == ("outranked", "superseded", (first.id,))
    assert head() == ("ACME", stronger.id, "SfdcCustomField")
    again = put("USD 90000", source="sfdc:Opportunity:1", authority="SfdcCustomField", at=T0 - timedelta(days=9))
    assert (again.action, again.valid) == ("unchanged", True)
    assert list(Fact.objects.filter(valid=True).values_list("id", flat=True)) == [stronger.id]
    assert Fact.objects.get(id=weaker.id).superseded_by_id == first.id  # outranked by the winner of its time


def test_a_key_a_salesforce_field_holds_outranks_the_same_predicate_extracted_as_multi_valued() -> None:
    """`next_step` accumulates from calls, but a Salesforce field `Next_Step__c` makes it
    single-valued for that account: once the field is stored, call facts rank below it."""

    def call(obj: str, n: int):
        return put(obj, source=f"gong:call:{n}", predicate="next_step", at=T0 + timedelta(days=n))

    before = call("send the security review", 1)
    field = put("Legal review", source="sfdc:Opportunity:1", predicate="next_step", authority="SfdcCustomField", at=T0)
    after = call("book the onsite", 2)
    assert (before.action, field.action, field.superseded) == ("stored", "superseded", (before.id,))
    assert (after.action, after.valid) == ("outranked", False)
    assert Fact.objects.get(id=after.id).superseded_by_id == field.id
    assert list(Fact.objects.filter(valid=True).values_list("id", flat=True)) == [field.id]
    assert call("book the onsite", 2).action == "unchanged"
    # Without a field, the same predicate keeps accumulating for another account.
    other = fact_insert_or_supersede(
        tenant="acme",
        fact=Extracted("Initech", "next_step", "demo", 0.8),
        source_ref="gong:call:3",
        authority="GongCall",
        observed_at=T0,
    )
    assert (other.action, other.valid) == ("stored", True)


def test_a_head_whose_fact_was_deleted_is_resolved_again_from_the_facts() -> None:
    older = put("USD 50000", source="gong:call:1", at=T0)
    newer = put("USD 80000", source="gong:call:2", at=T0 + timedelta(days=7))
    Fact.objects.filter(id=newer.id).delete()  # the head now names a fact that is gone
    assert not Fact.objects.filter(valid=True).exists()
    late = put("USD 60000", source="gong:call:3", at=T0 + timedelta(days=1))
    # Ranked against the stored facts, not the deleted head: it is the only valid one.
    assert (late.action, late.valid) == ("inserted", True) and head()[1] == late.id
    assert Fact.objects.get(id=older.id).valid is False


def test_facts_stored_without_a_head_are_all_ranked_by_the_next_write_of_their_key() -> None:
    """Facts stored before heads existed (or by hand) have no head: the first write resolves them all."""
    put("USD 50000", source="gong:call:1", at=T0)
    FactHead.objects.all().delete()
    stray = Fact.objects.create(
        id="f" * 32,
        tenant="acme",
        subject="acme",
        predicate="budget",
        object="USD 70000",
        confidence=0.5,
        source_authority="GongCall",
        source_ref="gong:call:9",
        observed_at=T0 + timedelta(days=3),
        valid=True,
        created_at=T0,
        updated_at=T0,
    )
    new = put("USD 65000", source="gong:call:2", at=T0 + timedelta(days=2))
    assert (new.action, new.valid) == ("outranked", False)
    assert list(Fact.objects.filter(valid=True).values_list("id", flat=True)) == [stray.id]
    assert head()[1] == stray.id


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_rival_facts_written_at_once_leave_exactly_the_best_ranked_one_valid(require_postgres: None) -> None:
    import threading

    from django.db import connection

    writers = 24
    start = threading.Barrier(writers)
    writes: dict[int, object] = {}

    def write(n: int) -> None:
        try:
            start.wait()
            writes[n] = put(f"USD {n}000", source=f"gong:call:{n}", at=T0 + timedelta(hours=n))
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    valid = list(Fact.objects.filter(tenant="acme", predicate="budget", valid=True))
    assert [f.object for f in valid] == [f"USD {writers - 1}000"]  # the latest observation, whatever the order
    # Each loser points to the fact that beat it, which may itself have lost later: every chain
    # of superseded_by ends at the one valid fact.
    superseded_by = dict(
        Fact.objects.filter(tenant="acme", predicate="budget", valid=False).values_list("id", "superseded_by_id")
    )
    assert len(superseded_by) == writers - 1 and len(writes) == writers
    for loser in superseded_by:
        end = loser
        for _ in range(writers):  # bounded: a cycle would never reach the valid fact
            end = superseded_by.get(end, end)
        assert end == valid[0].id, loser
    # The writers raced to create the key's head: one row, naming the valid fact and its rank.
    assert list(FactHead.objects.values_list("fact_id", "observed_at")) == [(valid[0].id, valid[0].observed_at)]


def test_recording_a_batch_again_updates_its_one_signal_evaluation_row() -> None:
    first = signal_evaluation_record(
        instance_id="gong-acme-1", tenant="acme", workflow="gong-ingest", source_ref="gong:call:1", fact_ids=["f1"]
    )
    again = signal_evaluation_record(
        instance_id="gong-acme-1",
        tenant="acme",
        workflow="gong-ingest",
        source_ref="gong:call:1",
        fact_ids=["f1", "f2"],
    )
    assert first.id is not None and again.id == first.id
    row = SignalEvaluation.objects.get()
    assert (row.id, row.fact_ids, row.fact_count) == (first.id, ["f1", "f2"], 2)


def test_storing_a_facts_embedding_again_replaces_it() -> None:
    budget, competitor = (
        put("USD 50000", source="gong:call:1"),
        put("Clari", source="gong:call:1", predicate="competitor_mentioned"),
    )
    assert (
        fact_embeddings_store(
            tenant="acme",
            model="m1",
            items=[
                (budget.id, "Acme budget: USD 50000", [1.0, 0.0]),
                (competitor.id, "Acme competitor: Clari", [0.0, 1.0]),
            ],
        )
        == 2
    )
    assert (
        fact_embeddings_store(tenant="acme", model="m2", items=[(budget.id, "Acme budget: USD 50000", [0.6, 0.8, 0.0])])
        == 1
    )
    rows = {e.fact_id: e for e in FactEmbedding.objects.all()}
    assert (rows[budget.id].model, rows[budget.id].dim, rows[competitor.id].model) == ("m2", 3, "m1")
    assert fact_similar(tenant="acme", vector=[0.6, 0.8, 0.0], limit=5)[0].fact_id == budget.id


def test_the_fact_function_uses_its_indexes_on_a_table_the_planner_thinks_small(require_postgres) -> None:
    """Migration 0005: on a fresh fact table the function's cached plans would scan it whole."""
    from django.db import connection

    def seq_scans() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'ingest_fact'")
            return int(cursor.fetchone()[0])

    def write(i: int) -> None:
        fact_insert_or_supersede(
            tenant="acme",
            fact=Extracted(f"Deal {i}", "budget", f"USD {i}", 0.8, "said"),
            source_ref=f"call-{i}",
            authority="GongCall",
            observed_at=T0,
        )

    write(0)
    after_one = seq_scans()
    for i in range(1, 300):
        write(i)
    assert seq_scans() == after_one  # no write scanned the table: each looked its fact and rivals up by index
    with connection.cursor() as cursor:
        cursor.execute("SELECT proconfig FROM pg_proc WHERE proname = 'ingest_fact_put'")
        assert cursor.fetchone()[0] == ["enable_seqscan=off"]


def test_a_superseding_write_checks_its_winner_at_once_by_index(require_postgres) -> None:
    """Migration 0006: the reference is checked inside the function (by the primary key, under
    its setting), not at COMMIT with a plan made while the table was small."""
    from django.db import IntegrityError, connection, transaction

    def seq_scans() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'ingest_fact'")
            return int(cursor.fetchone()[0])

    first = put("USD 0", source="call-0", at=T0)
    before = seq_scans()
    for i in range(1, 200):  # each newer budget supersedes the one before it
        assert put(f"USD {i}", source=f"call-{i}", at=T0 + timedelta(minutes=i)).action == "superseded"
    assert seq_scans() == before
    assert Fact.objects.filter(valid=True).count() == 1 and Fact.objects.get(id=first.id).superseded_by_id

    # Immediate: a dangling reference fails its own statement, inside the test's transaction
    # (a deferred check would wait for a COMMIT this test never reaches).
    with pytest.raises(IntegrityError), transaction.atomic():
        Fact.objects.filter(id=first.id).update(superseded_by_id="no-such-fact")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT condeferrable FROM pg_constraint WHERE conrelid = 'ingest_fact'::regclass "
            "AND contype = 'f' AND conkey = ARRAY[(SELECT attnum FROM pg_attribute WHERE "
            "attrelid = 'ingest_fact'::regclass AND attname = 'superseded_by_id')]"
        )
        assert cursor.fetchall() == [(False,)]


def test_each_fact_write_maintains_only_the_indexes_a_query_uses(require_postgres) -> None:
    """Migrations 0008 and 0013: no single-column tenant index, no LIKE (varchar_pattern_ops)
    indexes, no (tenant, predicate, valid); the reference indexed only where it is set. Every
    index on the fact table is one that a lookup or a listing uses."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'ingest_fact'")
        definitions = sorted(d.split(" USING btree ", 1)[1] for (d,) in cursor.fetchall())
    assert definitions == [
        "(id)",  # the primary key
        "(superseded_by_id) WHERE (superseded_by_id IS NOT NULL)",  # a deleted fact's losers
        "(tenant, source_ref)",
        "(tenant, upper((subject)::text), predicate) WHERE valid",  # a key's facts, resolved without a head
    ]


def test_deleting_a_winner_finds_its_losers_through_the_partial_index(require_postgres) -> None:
    """The `superseded_by` index holds only the facts that have one: the reference's check and
    Django's SET NULL, which ask for a value, still find a deleted winner's losers by index."""
    from django.db import connection

    loser = put("USD 1", source="call-1", at=T0)
    winner = put("USD 2", source="call-2", at=T0 + timedelta(minutes=1))
    assert winner.superseded == (loser.id,)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT 1 FROM ONLY ingest_fact x WHERE %s = superseded_by_id FOR KEY SHARE OF x", [winner.id]
        )
        plan = "\n".join(row for (row,) in cursor.fetchall())
    assert "fact_superseded_by" in plan, plan
    Fact.objects.filter(id=winner.id).delete()
    assert Fact.objects.get(id=loser.id).superseded_by_id is None
