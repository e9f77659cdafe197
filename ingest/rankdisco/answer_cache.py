"""The DataForSEO lookup cache: a task's answer kept per tenant, endpoint and task for a while.

Re-onboarding a domain inside the cache's lifetime (`RUNLEDGER_DATAFORSEO_CACHE_HOURS`, 24 by
default; 0 turns the cache off) pays nothing for what DataForSEO already answered: the client
reads the kept answer instead of calling (`ingest.sources.dataforseo.DataForSEOClient.live`), and
the step books a zero-cost row that says `cache_hit` and what it `saved`. An expired answer is
not served; the next call's answer replaces it.

Kept per tenant: one tenant's onboardings neither read another's answers nor show its spend.
Used inside a step only (the tenant is the running instance's): outside one nothing is kept.

The answer a step paid for is not served back to that same step: a retry of the step (after a
crash between the answer and the step's commit) goes to the step's call journal instead, which
holds the same answer and books its real cost once (ingest/engine/runtime/journal.py), rather
than booking a cache hit for money that was spent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings

from ingest.engine import call_journal_current
from ingest.engine import now as engine_now
from ingest.rankdisco.models import DataForSEOAnswer

DEFAULT_HOURS = 24.0


def cache_lifetime() -> timedelta:
    """How long an answer is served; zero when the cache is off."""
    hours = float(getattr(settings, "RUNLEDGER_DATAFORSEO_CACHE_HOURS", DEFAULT_HOURS))
    return timedelta(hours=max(hours, 0.0))


def task_key(task: Mapping[str, Any]) -> str:
    """The digest of a task: the same target with the same options is the same task."""
    return hashlib.sha256(json.dumps(task, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def _target(task: Mapping[str, Any]) -> str:
    target = task.get("target")
    if target:
        return str(target)[:300]
    return f"{len(task.get('targets') or [])} targets"


def _cost(answer: Mapping[str, Any]) -> Decimal:
    try:
        return Decimal(str(answer.get("cost") or 0))
    except InvalidOperation:
        return Decimal(0)


class TenantAnswerCache:
    """`ingest.sources.dataforseo.AnswerCache` on the `DataForSEOAnswer` table, per tenant."""

    def get(self, endpoint: str, task: Mapping[str, Any]) -> dict[str, Any] | None:
        journal = call_journal_current()
        if journal is None or not cache_lifetime():
            return None
        row = (
            DataForSEOAnswer.objects.filter(
                tenant=journal.tenant, endpoint=endpoint, task_key=task_key(task), expires_at__gt=engine_now()
            )
            .values_list("answer", "fetched_by")
            .first()
        )
        if row is None or row[1] == journal.key:
            return None
        answer: dict[str, Any] = row[0]
        return answer

    def put(self, endpoint: str, task: Mapping[str, Any], answer: Mapping[str, Any]) -> None:
        journal = call_journal_current()
        lifetime = cache_lifetime()
        if journal is None or not lifetime:
            return
        now = engine_now()
        row = DataForSEOAnswer(
            tenant=journal.tenant,
            endpoint=endpoint,
            task_key=task_key(task),
            target=_target(task),
            answer=dict(answer),
            cost=_cost(answer),
            fetched_by=journal.key,
            fetched_at=now,
            expires_at=now + lifetime,
        )
        DataForSEOAnswer.objects.bulk_create(
            [row],
            update_conflicts=True,
            unique_fields=["tenant", "endpoint", "task_key"],
            update_fields=["target", "answer", "cost", "fetched_by", "fetched_at", "expires_at"],
        )
