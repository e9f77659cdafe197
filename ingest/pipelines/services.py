"""Writes to the pipelines' tables. Keyword-only arguments; each write is idempotent, because
workflow steps run at least once (a step may run again after a crash or a retry).

Here: a batch's signal evaluation row, facts' embeddings, keyword lists, connections and their
OAuth tokens, prices. The facts themselves are written by `ingest.pipelines.fact_writes`, whose
public names (`fact_insert_or_supersede`, `facts_insert_or_supersede`, `FactSpec`, `FactWrite`,
`fact_id_for`) are re-exported here."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone

from ingest.engine import ByVendor, lookup_hash, prepared_row
from ingest.pipelines.fact_writes import FactSpec as FactSpec
from ingest.pipelines.fact_writes import FactWrite as FactWrite
from ingest.pipelines.fact_writes import fact_id_for as fact_id_for
from ingest.pipelines.fact_writes import fact_insert_or_supersede as fact_insert_or_supersede
from ingest.pipelines.fact_writes import facts_insert_or_supersede as facts_insert_or_supersede
from ingest.pipelines.models import (
    Connection,
    ConnectionKind,
    FactEmbedding,
    KeywordList,
    Price,
    SignalEvaluation,
)

_SIGNAL_EVALUATION_PUT = """
    INSERT INTO ingest_signalevaluation (instance_id, tenant, workflow, source_ref, fact_ids, fact_count, created_at)
    VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s)
    ON CONFLICT (instance_id) DO UPDATE SET tenant = EXCLUDED.tenant, workflow = EXCLUDED.workflow,
        source_ref = EXCLUDED.source_ref, fact_ids = EXCLUDED.fact_ids, fact_count = EXCLUDED.fact_count,
        created_at = EXCLUDED.created_at
    RETURNING id
"""


def signal_evaluation_record(
    *, instance_id: str, tenant: str, workflow: str, source_ref: str, fact_ids: Sequence[str]
) -> SignalEvaluation:
    """The one evaluation row of a batch (an instance); recording it again updates it.

    One INSERT … ON CONFLICT DO UPDATE (update_or_create took a transaction and three more
    round trips), which also leaves no window for two writers to insert the row twice; on
    PostgreSQL a prepared one (Django's bulk_create built the statement anew every time)."""
    row = SignalEvaluation(
        instance_id=instance_id,
        tenant=tenant,
        workflow=workflow,
        source_ref=source_ref,
        fact_ids=list(fact_ids),
        fact_count=len(fact_ids),
        created_at=timezone.now(),
    )
    _signal_evaluation_put()(row)
    return row


def _signal_evaluation_put_prepared(row: SignalEvaluation) -> None:
    got = prepared_row(
        _SIGNAL_EVALUATION_PUT,
        [
            row.instance_id,
            row.tenant,
            row.workflow,
            row.source_ref,
            json.dumps(row.fact_ids),
            row.fact_count,
            row.created_at,
        ],
    )
    assert got is not None  # an upsert with RETURNING returns its row
    row.id = got[0]


def _signal_evaluation_put_orm(row: SignalEvaluation) -> None:
    SignalEvaluation.objects.bulk_create(
        [row],
        update_conflicts=True,
        unique_fields=["instance_id"],
        update_fields=["tenant", "workflow", "source_ref", "fact_ids", "fact_count", "created_at"],
    )


_signal_evaluation_put = ByVendor[Callable[[SignalEvaluation], None]](
    postgresql=_signal_evaluation_put_prepared, sqlite=_signal_evaluation_put_orm
)


def fact_embeddings_store(*, tenant: str, model: str, items: Sequence[tuple[str, str, Sequence[float]]]) -> int:
    """Store (fact id, text, vector) rows; an existing embedding of a fact is replaced.

    One INSERT … ON CONFLICT DO UPDATE for the batch (update_or_create took a locking read and
    a write per fact)."""
    import numpy as np  # here, not at the top: a worker's start would pay ~0.15 s for it (bench/worker_boot.py)

    now = timezone.now()
    rows = {
        fact_id: FactEmbedding(
            fact_id=fact_id,
            tenant=tenant,
            model=model,
            dim=len(vector),
            vector=np.asarray(vector, dtype="<f4").tobytes(),
            text=text,
            created_at=now,
        )
        for fact_id, text, vector in items
    }
    FactEmbedding.objects.bulk_create(
        list(rows.values()),
        update_conflicts=True,
        unique_fields=["fact"],
        update_fields=["tenant", "model", "dim", "vector", "text", "created_at"],
    )
    return len(rows)


def keyword_list_set(*, tenant: str, keywords: Sequence[str]) -> KeywordList:
    cleaned = sorted({k.strip() for k in keywords if k and k.strip()}, key=str.lower)
    row, _ = KeywordList.objects.update_or_create(
        tenant=tenant, defaults={"keywords": cleaned, "updated_at": timezone.now()}
    )
    return row


def connection_upsert(
    *,
    tenant: str,
    kind: str,
    base_url: str = "",
    key: str = "",
    secret: str = "",
    refresh_token: str = "",
    options: dict[str, Any] | None = None,
    webhook_key: str = "",
    enabled: bool = True,
) -> Connection:
    """Create or replace a tenant's connection; credentials are encrypted by their fields, the
    webhook key is also stored as its lookup hash (ingest.engine.secrets)."""
    if kind not in ConnectionKind.values:
        raise ValueError(f"connection kind {kind!r} is not one of {', '.join(ConnectionKind.values)}")
    options = dict(options or {})
    # An older caller's refresh token in the options would be stored in clear: take it out.
    refresh_token = refresh_token or str(options.pop("refresh_token", "") or "")
    row, _ = Connection.objects.update_or_create(
        tenant=tenant,
        kind=kind,
        defaults={
            "base_url": base_url,
            "key": key,
            "secret": secret,
            "refresh_token": refresh_token,
            "options": options,
            "webhook_key": webhook_key,
            "webhook_key_hash": lookup_hash(webhook_key),
            "enabled": enabled,
            "updated_at": timezone.now(),
            "access_token": "",
            "access_token_expires_at": None,
            "instance_url": "",
        },
    )
    return row


def connection_token_store(
    *, tenant: str, kind: str, access_token: str, instance_url: str, expires_at: datetime
) -> None:
    """Keep a refreshed OAuth access token (encrypted) so another process or a restart reuses it
    until `expires_at` instead of authenticating again."""
    Connection.objects.filter(tenant=tenant, kind=kind).update(
        access_token=access_token, instance_url=instance_url, access_token_expires_at=expires_at
    )


def price_upsert(
    *,
    service: str,
    model: str = "",
    effective_from: datetime,
    input_per_million: Decimal | str = "0",
    cached_input_per_million: Decimal | str = "0",
    output_per_million: Decimal | str = "0",
    per_call: Decimal | str = "0",
    per_item: Decimal | str = "0",
    note: str = "",
) -> Price:
    row, _ = Price.objects.update_or_create(
        service=service,
        model=model,
        effective_from=effective_from,
        defaults={
            "input_per_million": Decimal(str(input_per_million)),
            "cached_input_per_million": Decimal(str(cached_input_per_million)),
            "output_per_million": Decimal(str(output_per_million)),
            "per_call": Decimal(str(per_call)),
            "per_item": Decimal(str(per_item)),
            "note": note,
        },
    )
    return row
