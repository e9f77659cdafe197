"""Dead letters: the failed instances an operator discards, lists or redrives (retries, rate-limited)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import QuerySet

from ingest.engine import clock
from ingest.engine.errors import (
    DeadLetterError,
    InvalidSelection,
    InvalidTransition,
    VersionRetired,
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
            raise DeadLetterError(
                f"dead letter {letter.id} is already {letter.state} (by {letter.resolved_by or 'the engine'})"
            )
        letter.state, letter.resolved_at, letter.resolved_by, letter.resolution = (
            DeadLetterState.DISCARDED,
            now,
            actor,
            reason,
        )
        letter.save()
        inst = Instance.objects.get(id=letter.instance_id)
        operator_history(inst, action="discard", actor=actor, reason=reason, now=now, dead_letter=letter.id)
    return letter


@dataclass(frozen=True)
class DeadLetterFilter:
    """ "Every open dead letter that matches", said explicitly. `tenants` is required: a bulk
    action never reaches past the tenants its caller named. None or "" means no condition."""

    tenants: tuple[str, ...]
    workflow: str | None = None
    step_name: str | None = None
    signature: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def dead_letter_select(
    *, filter: DeadLetterFilter | None = None, ids: Collection[int] | None = None
) -> QuerySet[DeadLetter]:
    """The open dead letters of a selection: `ids`, `filter`, or both (their intersection).

    There is no "no selection means all": an empty id list or no selection at all raises
    InvalidSelection, so a caller whose parsing lost the ids cannot act on everything."""
    if filter is None and ids is None:
        raise InvalidSelection("a bulk action needs ids or an explicit DeadLetterFilter; nothing was done")
    qs = DeadLetter.objects.filter(state=DeadLetterState.OPEN)
    if ids is not None:
        wanted = list(ids)
        if not wanted or not all(isinstance(i, int) and not isinstance(i, bool) for i in wanted):
            raise InvalidSelection(f"the id list {wanted[:20]!r} is empty or holds non-integers; nothing was done")
        qs = qs.filter(id__in=wanted)
    if filter is not None:
        if not filter.tenants or not all(filter.tenants):
            raise InvalidSelection("a DeadLetterFilter names its tenants; nothing was done")
        qs = qs.filter(tenant__in=list(filter.tenants))
        conditions = {
            "workflow": filter.workflow,
            "step_name": filter.step_name,
            "signature": filter.signature,
            "created_at__gte": filter.since,
            "created_at__lt": filter.until,
        }
        qs = qs.filter(**{k: v for k, v in conditions.items() if v})
    return qs.order_by("created_at", "id")


def dead_letter_redrive(
    *,
    ids: Collection[int] | None = None,
    filter: DeadLetterFilter | None = None,
    rate_per_second: float = 5.0,
    actor: str,
    reason: str = "",
) -> int:
    """Retry each selected dead letter from its failed step, at most `rate_per_second` starting
    per second; returns how many were redriven (a letter resolved meanwhile is skipped).

    The cap holds without a thread waiting: retry i is scheduled to start i / rate seconds from now.
    """
    if not rate_per_second or rate_per_second <= 0:
        raise DeadLetterError(f"rate_per_second must be positive; got {rate_per_second!r}")
    now = clock.now()
    letters = list(dead_letter_select(filter=filter, ids=ids).values_list("instance_id", flat=True))
    done = 0
    for i, instance_id in enumerate(dict.fromkeys(letters)):
        start_at = now + timedelta(seconds=i / rate_per_second)
        try:
            instance_retry(instance_id=instance_id, actor=actor, reason=reason or "bulk redrive", start_at=start_at)
        except (InvalidTransition, VersionRetired):
            continue  # retried or restarted meanwhile, or its version retired: nothing to redrive
        done += 1
    return done
