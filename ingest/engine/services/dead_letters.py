"""Dead letters: the failed instances an operator discards, lists or redrives (retries, rate-limited)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from ingest.engine import clock
from ingest.engine.errors import (
    DeadLetterError,
    InvalidTransition,
)
from ingest.engine.models import (
    DeadLetter,
    DeadLetterState,
    Instance,
)
from ingest.engine.services.base import operator_history
from ingest.engine.services.control import instance_retry


def dead_letter_discard(*, dead_letter_id: int, actor: str, reason: str) -> DeadLetter:
    if not reason.strip():
        raise DeadLetterError("discarding a dead letter needs a reason (it is kept in the history)")
    now = clock.now()
    with transaction.atomic():
        try:
            letter = DeadLetter.objects.select_for_update().get(id=dead_letter_id)
        except DeadLetter.DoesNotExist:
            raise DeadLetterError(f"no dead letter has the id {dead_letter_id}") from None
        if letter.state != DeadLetterState.OPEN:
            raise DeadLetterError(f"dead letter {letter.id} is already {letter.state} (by {letter.resolved_by or 'the engine'})")
        letter.state, letter.resolved_at, letter.resolved_by, letter.resolution = DeadLetterState.DISCARDED, now, actor, reason
        letter.save()
        inst = Instance.objects.get(id=letter.instance_id)
        operator_history(inst, action="discard", actor=actor, reason=reason, now=now, dead_letter=letter.id)
    return letter


def dead_letter_select(*, workflow: str | None = None, step_name: str | None = None, signature: str | None = None,
                       tenant: str | Iterable[str] | None = None, since: datetime | None = None,
                       until: datetime | None = None, ids: Iterable[int] | None = None) -> Any:
    qs = DeadLetter.objects.filter(state=DeadLetterState.OPEN)
    if workflow:
        qs = qs.filter(workflow=workflow)
    if step_name:
        qs = qs.filter(step_name=step_name)
    if signature:
        qs = qs.filter(signature=signature)
    if isinstance(tenant, str):
        qs = qs.filter(tenant=tenant)
    elif tenant is not None:
        qs = qs.filter(tenant__in=list(tenant))
    if since:
        qs = qs.filter(created_at__gte=since)
    if until:
        qs = qs.filter(created_at__lt=until)
    if ids is not None:
        qs = qs.filter(id__in=list(ids))
    return qs.order_by("created_at", "id")


def dead_letter_redrive(*, rate_per_second: float = 5.0, actor: str, reason: str = "", **filters: Any) -> int:
    """Retry every selected dead letter from its failed step, at most `rate_per_second` starting per second.

    The cap holds without a thread waiting: retry i is scheduled to start i / rate seconds from now.
    """
    if not rate_per_second or rate_per_second <= 0:
        raise DeadLetterError(f"rate_per_second must be positive; got {rate_per_second!r}")
    now = clock.now()
    letters = list(dead_letter_select(**filters).values_list("instance_id", flat=True))
    for i, instance_id in enumerate(letters):
        start_at = now + timedelta(seconds=i / rate_per_second)
        try:
            instance_retry(instance_id=instance_id, actor=actor, reason=reason or "bulk redrive", start_at=start_at)
        except InvalidTransition:
            continue  # retried or restarted meanwhile: nothing to redrive
    return len(letters)
