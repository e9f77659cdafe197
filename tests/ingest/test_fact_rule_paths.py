"""The fact-ranking rule is written twice: as PostgreSQL's `ingest_fact_put` (one round trip per
write, the key's head row as its lock) and with the ORM for SQLite. The same writes, replayed
through each path on empty tables (the same ids: a tie is broken by the id), must give the same
answer for every write and leave the same facts valid, superseded by the same winners, under the
same heads. A batch of writes (`ingest_facts_put`; the ORM path in one transaction) must answer
as the same writes one at a time, on either database."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from ingest.extraction import Fact as Extracted
from ingest.pipelines import fact_writes
from ingest.pipelines.models import Fact, FactHead

pytestmark = [pytest.mark.db, pytest.mark.django_db]
T0 = datetime(2025, 3, 3, 15, tzinfo=UTC)
SUBJECTS = ("Acme", "ACME", "Globex")
PREDICATES = ("budget", "deal_stage", "competitor_mentioned")  # two single-valued, one multi-valued
OBJECTS = ("USD 50000", "USD 80000", "Clari")
SOURCES = ("gong:call:1", "gong:call:2", "sfdc:Opportunity:006", "gong:call:3")
AUTHORITIES = tuple(fact_writes.AUTHORITY_RANK)


def _writes(seed: int, count: int = 40) -> list[dict[str, Any]]:
    """A sequence of fact writes that repeats itself often enough to hit every branch: repeats of
    a stored fact, ties broken by ordinal, older observations arriving late, deleted winners."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for _ in range(count):
        if out and rng.random() < 0.15:
            out.append(dict(rng.choice(out)))  # a redelivery of an earlier write
            continue
        if out and rng.random() < 0.05:
            out.append({"delete": rng.randrange(len(out))})
            continue
        out.append(
            {
                "subject": rng.choice(SUBJECTS),
                "predicate": rng.choice(PREDICATES),
                "object": rng.choice(OBJECTS),
                "source": rng.choice(SOURCES),
                "authority": rng.choice(AUTHORITIES),
                "at": T0 + timedelta(days=rng.randrange(3)),
                "ordinal": rng.randrange(3),
            }
        )
    return out


def _replay(writes: list[dict[str, Any]], *, tenant: str, put: Any) -> tuple[list[tuple[Any, ...]], dict[str, str]]:
    """(each write's answer, fact id → the write that made it), written through `put`."""
    return _replay_batches(writes, tenant=tenant, put_many=lambda batch, now: [put(v, single=s) for v, s in batch])


def _replay_batches(
    writes: list[dict[str, Any]], *, tenant: str, put_many: Any, seed: int | None = None
) -> tuple[list[tuple[Any, ...]], dict[str, str]]:
    """`_replay` with the writes between two deletes sent through `put_many` in batches (one
    write each without a seed, else of random sizes up to 8)."""
    rng = random.Random(seed)
    answers: list[tuple[Any, ...]] = []
    made: dict[str, str] = {}
    ids: list[str | None] = []
    batch: list[tuple[dict[str, Any], bool]] = []

    def flush() -> None:
        for written in put_many(list(batch), timezone.now()) if batch else []:
            ids.append(written.id)
            answers.append((written.action, written.valid, tuple(sorted(made[i] for i in written.superseded))))
        batch.clear()

    for n, w in enumerate(writes):
        if "delete" in w:
            flush()
            victim = ids[w["delete"]]
            Fact.objects.filter(id=victim).delete()
            answers.append(("deleted", victim is not None and victim in made))
            ids.append(None)
            continue
        fact = Extracted(w["subject"], w["predicate"], w["object"], 0.8, "said so")
        values = fact_writes.fact_values(
            tenant=tenant,
            fact=fact,
            source_ref=w["source"],
            authority=w["authority"],
            observed_at=w["at"],
            instance_id="",
            obj=None,
            ordinal=w["ordinal"],
            now=timezone.now(),
        )
        made.setdefault(values["id"], f"write {n}")
        batch.append((values, fact_writes._is_single_valued(w["predicate"], w["authority"])))
        if seed is None or rng.random() < 1 / 8:
            flush()
    flush()
    return answers, made


def _state(tenant: str, made: dict[str, str]) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    facts = {(made[f.id], f.valid, made.get(f.superseded_by_id or "")) for f in Fact.objects.filter(tenant=tenant)}
    heads = {
        (h.subject_key, h.predicate, made.get(h.fact_id, "gone"), h.source_authority, h.observed_at, h.ordinal)
        for h in FactHead.objects.filter(tenant=tenant)
    }
    return facts, heads


@pytest.mark.parametrize("seed", range(24))
def test_the_sql_function_and_the_orm_path_give_the_same_answers_on_the_same_writes(
    require_postgres: None, seed: int
) -> None:
    writes = _writes(seed)
    in_sql, made = _replay(writes, tenant="acme", put=fact_writes._fact_put_postgres)
    by_sql = _state("acme", made)
    Fact.objects.all().delete()
    FactHead.objects.all().delete()
    in_orm, made_orm = _replay(writes, tenant="acme", put=fact_writes._fact_put_orm)
    assert made_orm == made
    for n, (a, b) in enumerate(zip(in_sql, in_orm, strict=True)):
        assert a == b, (n, writes[n], a, b)
    assert _state("acme", made) == by_sql
    # the sequences are not trivial: each path stored, outranked and superseded facts
    actions = {answer[0] for answer in in_sql}
    assert {"inserted", "outranked"} <= actions, actions


def _compare(writes: list[dict[str, Any]], first: tuple[Any, ...], second: tuple[Any, ...]) -> None:
    (in_a, made), (in_b, made_b) = first, second
    assert made_b == made
    for n, (a, b) in enumerate(zip(in_a, in_b, strict=True)):
        assert a == b, (n, writes[n], a, b)


@pytest.mark.parametrize("seed", range(24))
def test_a_batch_answers_as_its_writes_one_at_a_time(seed: int) -> None:
    """Both databases: the batch path (`ingest_facts_put` on PostgreSQL, the ORM in one
    transaction on SQLite) against this database's one-at-a-time path, answers and rows."""
    writes = _writes(seed)
    one = _replay(writes, tenant="acme", put=fact_writes._fact_put())
    by_one = _state("acme", one[1])
    Fact.objects.all().delete()
    FactHead.objects.all().delete()
    batched = _replay_batches(writes, tenant="acme", put_many=fact_writes._facts_put(), seed=seed)
    _compare(writes, one, batched)
    assert _state("acme", one[1]) == by_one


def test_a_batch_inserts_its_free_multi_valued_facts_and_ranks_the_rest_in_order() -> None:
    """A batch where a single-valued write precedes a multi-valued fact of its key (ranked
    against the head that write made), a multi-valued fact of a key with no head (stored by
    the set insert) and a repeat of it: the public batch call answers as the one-at-a-time calls."""
    field, call = fact_writes.SourceAuthority.SFDC_CUSTOM_FIELD, fact_writes.SourceAuthority.GONG_CALL
    specs = [
        ("Acme", "budget", "USD 50000", field),
        ("ACME", "budget", "USD 80000", call),
        ("Acme", "competitor_mentioned", "Gong", field),  # single-valued: a field's authority
        ("acme", "competitor_mentioned", "Clari", call),  # multi-valued, ranked against that head
        ("Globex", "competitor_mentioned", "Clari", call),  # multi-valued, no head: the set insert
        ("Globex", "competitor_mentioned", "Clari", call),
        ("Globex", "budget", "USD 1", call),
    ]
    facts = [
        fact_writes.FactSpec(Extracted(s, p, o, 0.8, "said so"), authority=a, ordinal=n)
        for n, (s, p, o, a) in enumerate(specs)
    ]
    batched = fact_writes.facts_insert_or_supersede(
        tenant="acme", facts=facts, source_ref="gong:call:9", observed_at=T0
    )
    rows = {f.id: (f.valid, f.superseded_by_id) for f in Fact.objects.filter(tenant="acme")}
    Fact.objects.all().delete()
    FactHead.objects.all().delete()
    single = [
        fact_writes.fact_insert_or_supersede(
            tenant="acme",
            fact=f.fact,
            source_ref="gong:call:9",
            authority=f.authority,
            observed_at=T0,
            ordinal=f.ordinal,
        )
        for f in facts
    ]
    assert [(w.id, w.action, w.valid, w.superseded) for w in batched] == [
        (w.id, w.action, w.valid, w.superseded) for w in single
    ]
    assert rows == {f.id: (f.valid, f.superseded_by_id) for f in Fact.objects.filter(tenant="acme")}
    assert [w.action for w in batched] == [
        "inserted",
        "outranked",
        "inserted",
        "outranked",
        "stored",
        "stored",
        "inserted",
    ]
    assert len(rows) == 6
