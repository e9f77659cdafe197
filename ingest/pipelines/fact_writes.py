"""Writes of facts: one fact or a call's batch, each inserted or superseding what it outranks.

A single-valued predicate (`SINGLE_VALUED`) holds one value per key (tenant, subject,
predicate): a newer or more authoritative fact (`AUTHORITY_RANK`) supersedes the key's head,
kept in `FactHead` and locked to serialise the writers of a key; every other predicate
accumulates. The rule is written twice, as PostgreSQL's `ingest_fact_put` / `ingest_facts_put`
(one prepared round trip) and with the ORM for SQLite, and `ByVendor` picks one per database.
Each write is idempotent (a fact's id derives from what it says), because workflow steps run
at least once. `ingest.pipelines.services` re-exports the public names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.db import transaction
from django.utils import timezone

from ingest.engine import ByVendor, prepared_row, prepared_rows
from ingest.extraction import Fact as ExtractedFact
from ingest.pipelines.models import Fact, FactHead, SourceAuthority

# Predicates that hold one value at a time: a newer or more authoritative fact supersedes the
# older one. Everything else (competitors, commitments, next steps…) accumulates.
SINGLE_VALUED = frozenset(
    {
        "budget",
        "deal_amount",
        "seat_count",
        "headcount",
        "close_date",
        "go_live_date",
        "deal_stage",
        "industry",
        "engagement",
    }
)
# Higher wins a conflict; equal authority lets the newer observation win.
AUTHORITY_RANK: dict[str, int] = {
    SourceAuthority.GONG_ENGAGEMENT: 0,
    SourceAuthority.GONG_CALL: 1,
    SourceAuthority.SFDC_FREE_TEXT: 1,
    SourceAuthority.SFDC_CUSTOM_FIELD: 2,
    SourceAuthority.SFDC_OPPORTUNITY_STAGE: 3,
}


@dataclass(frozen=True)
class FactWrite:
    """What persisting one fact did: inserted (and won), superseded an older fact, lost to a
    stronger one already stored ("outranked"), found it already stored ("unchanged"), or
    stored a fact of a multi-valued predicate, new or not ("stored")."""

    id: str
    action: str
    valid: bool
    superseded: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "action": self.action, "valid": self.valid, "superseded": list(self.superseded)}


def fact_id_for(*, tenant: str, source_ref: str, fact: ExtractedFact) -> str:
    """A deterministic id: hash of source|subject|predicate|object, so the same fact from the same
    source gets the same id and a replay upserts instead of duplicating; the source is
    tenant-qualified so two tenants never share a fact row."""
    return fact.key(f"{tenant}:{source_ref}")


def _is_single_valued(predicate: str, authority: str) -> bool:
    return predicate in SINGLE_VALUED or authority in (
        SourceAuthority.SFDC_CUSTOM_FIELD,
        SourceAuthority.SFDC_OPPORTUNITY_STAGE,
    )


def _rank(row: Fact) -> tuple[int, datetime, int, str]:
    """Authority, then observation time, then position in the batch (a call that revises an
    amount states the new one later): the same winner whatever order the writes ran in."""
    return (AUTHORITY_RANK.get(row.source_authority, 0), row.observed_at, row.ordinal, row.id)


# The ranks as PostgreSQL array literals, built once: adapting two Python lists at every fact
# write cost psycopg more than the rest of the statement's parameters together.
_AUTHORITIES = "{" + ",".join(AUTHORITY_RANK) + "}"
_RANKS = "{" + ",".join(str(rank) for rank in AUTHORITY_RANK.values()) + "}"


_FACT_PUT = (
    "SELECT action, is_valid, superseded FROM ingest_fact_put(%s::varchar, %s::varchar, %s::varchar, %s::varchar, "
    "%s::jsonb, %s::float8, %s::varchar, %s::varchar, %s::text, %s::timestamptz, %s::integer, %s::varchar, "
    "%s::timestamptz, %s::boolean, %s::text[], %s::integer[])"
)


def _fact_put_postgres(v: dict[str, Any], *, single: bool) -> FactWrite:
    """One round trip: `ingest_fact_put` (migrations 0003, 0007) inserts the fact and, for a
    single-valued predicate, ranks it against its key's head row (locked) as `_rank` does. Run
    outside a transaction it is its own, committed without waiting for the WAL flush (the
    step's completion, committed after it, flushes it). Prepared (`sql.prepared_row`): a
    call's 18 or so fact steps skip the parse, the plan and Django's cursor wrapper.
    """
    params = [
        v["id"],
        v["tenant"],
        v["subject"],
        v["predicate"],
        json.dumps(v["object"]),
        v["confidence"],
        v["source_authority"],
        v["source_ref"],
        v["evidence"],
        v["observed_at"],
        v["ordinal"],
        v["instance_id"],
        v["created_at"],
        single,
        _AUTHORITIES,
        _RANKS,
    ]
    row = prepared_row(_FACT_PUT, params)
    assert row is not None  # the function returns exactly one row
    action, valid, superseded = row
    return FactWrite(v["id"], action, valid, tuple(superseded))


def fact_values(
    *,
    tenant: str,
    fact: ExtractedFact,
    source_ref: str,
    authority: str,
    observed_at: datetime,
    instance_id: str,
    obj: Any,
    ordinal: int,
    now: datetime,
) -> dict[str, Any]:
    """The row a fact write stores, as both paths of the rule take it."""
    return {
        "id": fact_id_for(tenant=tenant, source_ref=source_ref, fact=fact),
        "tenant": tenant,
        "subject": fact.subject[:300],
        "predicate": fact.predicate[:100],
        "object": fact.object if obj is None else obj,
        "confidence": fact.confidence,
        "source_authority": authority,
        "source_ref": source_ref,
        "evidence": fact.evidence,
        "observed_at": observed_at,
        "instance_id": instance_id,
        "ordinal": ordinal,
        "created_at": now,
    }


def fact_insert_or_supersede(
    *,
    tenant: str,
    fact: ExtractedFact,
    source_ref: str,
    authority: str,
    observed_at: datetime,
    instance_id: str = "",
    obj: Any = None,
    ordinal: int = 0,
) -> FactWrite:
    """Insert a fact by its deterministic id (a second insert changes nothing), then resolve the
    conflict with the valid facts of the same subject and predicate (for single-valued ones):
    the most authoritative, then most recently observed, fact stays valid; the others point
    to it through `superseded_by`. `obj` overrides the stored JSON object (default: the text)."""
    values = fact_values(
        tenant=tenant,
        fact=fact,
        source_ref=source_ref,
        authority=authority,
        observed_at=observed_at,
        instance_id=instance_id,
        obj=obj,
        ordinal=ordinal,
        now=timezone.now(),
    )
    return _fact_put()(values, single=_is_single_valued(fact.predicate, authority))


def _fact_put_orm(values: dict[str, Any], *, single: bool) -> FactWrite:
    """The rule `ingest_fact_put` applies, written with the ORM for SQLite, where a transaction
    takes the write lock at BEGIN (transaction_mode IMMEDIATE, see dashboard/config.py): writers
    are serialised, so the resolution needs no lock of its own. tests/ingest/test_fact_rule_paths.py
    runs both on the same writes and holds them to the same answers."""
    fact_id, tenant, now = values["id"], values["tenant"], values["created_at"]
    row = Fact(**values, valid=True, updated_at=now)
    key = {"tenant": tenant, "subject_key": row.subject.upper(), "predicate": row.predicate}
    if not single:
        # Nothing to resolve: one INSERT … ON CONFLICT DO NOTHING (most facts take this path),
        # unless a single-valued writer holds the key and its head outranks this fact.
        _, head_fact = _key_winner(key)
        if head_fact is not None and _rank(row) < _rank(head_fact):
            with transaction.atomic():
                existing = Fact.objects.filter(id=fact_id).values_list("valid", flat=True).first()
                if existing is not None:
                    return FactWrite(fact_id, "unchanged", existing)
                row.valid, row.superseded_by_id = False, head_fact.id
                row.save(force_insert=True)
            return FactWrite(fact_id, "outranked", False)
        Fact.objects.bulk_create([row], ignore_conflicts=True)
        return FactWrite(fact_id, "stored", True)
    # Rank against the key's head, or, for a new key or a head whose fact is gone or no longer
    # valid, against all the key's valid facts.
    with transaction.atomic():
        existing = Fact.objects.filter(id=fact_id).values_list("valid", flat=True).first()
        head, head_fact = _key_winner(key)
        if head_fact is not None:
            if existing is not None:
                return FactWrite(fact_id, "unchanged", existing)
            if _rank(row) > _rank(head_fact):
                row.save(force_insert=True)
                _head_put(head, key, row, now)
                Fact.objects.filter(id=head_fact.id).update(valid=False, superseded_by=fact_id, updated_at=now)
                return FactWrite(fact_id, "superseded", True, (head_fact.id,))
            row.valid, row.superseded_by_id = False, head_fact.id
            row.save(force_insert=True)
            return FactWrite(fact_id, "outranked", False)
        if existing is None:
            row.save(force_insert=True)
        rivals = list(
            Fact.objects.filter(tenant=tenant, subject__iexact=row.subject, predicate=row.predicate, valid=True)
        )
        if not rivals:  # stored before and outranked by a fact deleted since
            FactHead.objects.filter(**key).delete()
            return FactWrite(fact_id, "unchanged", bool(existing))
        winner = max(rivals, key=_rank)
        _head_put(head, key, winner, now)
        losers = sorted(r.id for r in rivals if r.id != winner.id)
        Fact.objects.filter(id__in=losers).update(valid=False, superseded_by=winner.id, updated_at=now)
        if existing is not None:
            return FactWrite(fact_id, "unchanged", winner.id == fact_id)
        if not losers:
            return FactWrite(fact_id, "inserted", True)
        if winner.id == fact_id:
            return FactWrite(fact_id, "superseded", True, tuple(losers))
        return FactWrite(fact_id, "outranked", False)


def _key_winner(key: dict[str, str]) -> tuple[FactHead | None, Fact | None]:
    """The key's head and its fact, the fact only while it exists and is valid (SQLite path)."""
    head = FactHead.objects.filter(**key).first()
    return head, (Fact.objects.filter(id=head.fact_id, valid=True).first() if head is not None else None)


def _head_put(head: FactHead | None, key: dict[str, str], winner: Fact, now: datetime) -> None:
    """Point the key's head at `winner` (SQLite path; PostgreSQL does this in the function)."""
    values = {
        "fact_id": winner.id,
        "source_authority": winner.source_authority,
        "observed_at": winner.observed_at,
        "ordinal": winner.ordinal,
        "updated_at": now,
    }
    if head is None:
        FactHead.objects.create(**key, **values)
    else:
        FactHead.objects.filter(id=head.id).update(**values)


@dataclass(frozen=True)
class FactSpec:
    """One fact of a batch (`facts_insert_or_supersede`): what `fact_insert_or_supersede` takes per fact."""

    fact: ExtractedFact
    authority: str
    ordinal: int
    obj: Any = None


def facts_insert_or_supersede(
    *, tenant: str, facts: Sequence[FactSpec], source_ref: str, observed_at: datetime, instance_id: str = ""
) -> list[FactWrite]:
    """`fact_insert_or_supersede` for each of `facts`, in order, in one transaction: the same
    answers and the same rows as writing them one at a time. On PostgreSQL one round trip
    (`ingest_facts_put`, migration 0012) in place of one per fact."""
    now = timezone.now()
    batch = [
        (
            fact_values(
                tenant=tenant,
                fact=spec.fact,
                source_ref=source_ref,
                authority=spec.authority,
                observed_at=observed_at,
                instance_id=instance_id,
                obj=spec.obj,
                ordinal=spec.ordinal,
                now=now,
            ),
            _is_single_valued(spec.fact.predicate, spec.authority),
        )
        for spec in facts
    ]
    if not batch:
        return []
    return _facts_put()(batch, now)


_FACTS_PUT = (
    "SELECT n, action, is_valid, superseded FROM ingest_facts_put(%s::jsonb, %s::timestamptz, %s::text[], "
    "%s::integer[]) ORDER BY n"
)


def _facts_put_postgres(batch: Sequence[tuple[dict[str, Any], bool]], now: datetime) -> list[FactWrite]:
    """The batch as one JSON array, each element a fact's row and whether it is single-valued."""
    rows = [
        {**{k: v for k, v in values.items() if k != "created_at"}, "observed_at": values["observed_at"].isoformat()}
        | {"single": single}
        for values, single in batch
    ]
    answers = prepared_rows(_FACTS_PUT, [json.dumps(rows), now, _AUTHORITIES, _RANKS])
    assert len(answers) == len(batch)  # the function answers one row per fact
    return [
        FactWrite(values["id"], action, valid, tuple(superseded))
        for (values, _), (_, action, valid, superseded) in zip(batch, answers, strict=True)
    ]


def _facts_put_orm(batch: Sequence[tuple[dict[str, Any], bool]], now: datetime) -> list[FactWrite]:
    """One transaction on SQLite too (one lock and one commit for the batch)."""
    with transaction.atomic():
        return [_fact_put_orm(values, single=single) for values, single in batch]


_facts_put = ByVendor[Callable[[Sequence[tuple[dict[str, Any], bool]], datetime], list[FactWrite]]](
    postgresql=_facts_put_postgres, sqlite=_facts_put_orm
)


class _FactPut(Protocol):
    def __call__(self, v: dict[str, Any], /, *, single: bool) -> FactWrite: ...


_fact_put = ByVendor[_FactPut](postgresql=_fact_put_postgres, sqlite=_fact_put_orm)
