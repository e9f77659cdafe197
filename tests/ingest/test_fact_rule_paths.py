"""The fact-ranking rule is written twice: as PostgreSQL's `ingest_fact_put` (one round trip per
write, the key's head row as its lock) and with the ORM for SQLite. The same writes, replayed
through each path on empty tables (the same ids: a tie is broken by the id), must give the same
answer for every write and leave the same facts valid, superseded by the same winners, under the
same heads."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from ingest.extraction import Fact as Extracted
from ingest.pipelines import services
from ingest.pipelines.models import Fact, FactHead

pytestmark = [pytest.mark.db, pytest.mark.django_db]
T0 = datetime(2025, 3, 3, 15, tzinfo=UTC)
SUBJECTS = ("Acme", "ACME", "Globex")
PREDICATES = ("budget", "deal_stage", "competitor_mentioned")  # two single-valued, one multi-valued
OBJECTS = ("USD 50000", "USD 80000", "Clari")
SOURCES = ("gong:call:1", "gong:call:2", "sfdc:Opportunity:006", "gong:call:3")
AUTHORITIES = tuple(services.AUTHORITY_RANK)


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
    answers: list[tuple[Any, ...]] = []
    made: dict[str, str] = {}
    ids: list[str | None] = []
    for n, w in enumerate(writes):
        if "delete" in w:
            victim = ids[w["delete"]]
            Fact.objects.filter(id=victim).delete()
            answers.append(("deleted", victim is not None and victim in made))
            ids.append(None)
            continue
        fact = Extracted(w["subject"], w["predicate"], w["object"], 0.8, "said so")
        values = services.fact_values(
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
        single = services._is_single_valued(w["predicate"], w["authority"])
        written = put(values, single=single)
        ids.append(written.id)
        answers.append((written.action, written.valid, tuple(sorted(made[i] for i in written.superseded))))
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
    in_sql, made = _replay(writes, tenant="acme", put=services._fact_put_postgres)
    by_sql = _state("acme", made)
    Fact.objects.all().delete()
    FactHead.objects.all().delete()
    in_orm, made_orm = _replay(writes, tenant="acme", put=services._fact_put_orm)
    assert made_orm == made
    for n, (a, b) in enumerate(zip(in_sql, in_orm, strict=True)):
        assert a == b, (n, writes[n], a, b)
    assert _state("acme", made) == by_sql
    # the sequences are not trivial: each path stored, outranked and superseded facts
    actions = {answer[0] for answer in in_sql}
    assert {"inserted", "outranked"} <= actions, actions
