"""Circuit breaker rows: the read every guarded call makes, and the compare-and-swap every change
makes. No lock is held across a call: a change applies only if the row still holds the state
the caller decided from (one guarded UPDATE, atomic on PostgreSQL and SQLite alike), so of 16
callers that all see an open breaker due for its probe, exactly one moves it to half-open."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from ingest.engine.breaker import BreakerPolicy, BreakerState
from ingest.engine.models import BreakerTransition, CircuitBreaker

_FIELDS = ("state", "failures", "window_started_at", "opened_at", "next_probe_at", "probe_started_at")


def breaker_state(key: str) -> BreakerState | None:
    """The breaker's state, or None when the key never failed (no row: closed)."""
    row = CircuitBreaker.objects.filter(key=key).values_list(*_FIELDS).first()
    return None if row is None else BreakerState(*row)


def breaker_insert(*, key: str, tenant: str, policy: BreakerPolicy, now: datetime) -> None:
    """Create the key's row, closed, unless another process already has."""
    CircuitBreaker.objects.bulk_create(
        [CircuitBreaker(key=key, tenant=tenant, updated_at=now, **({} if policy is None else _policy(policy)))],
        ignore_conflicts=True,
    )


def breaker_swap(
    *,
    key: str,
    old: BreakerState,
    new: BreakerState,
    policy: BreakerPolicy | None,
    now: datetime,
    reason: str,
    actor: str = "",
) -> bool:
    """Store `new` if the row still holds `old`; a change of state also appends its transition.
    False when another caller changed the row first (decide again from a fresh read)."""
    match = {name: getattr(old, name) for name in _FIELDS}
    with transaction.atomic():
        changed = CircuitBreaker.objects.filter(key=key, **match).update(
            **{name: getattr(new, name) for name in _FIELDS},
            updated_at=now,
            **({} if policy is None else _policy(policy)),
        )
        if changed and new.state != old.state:
            BreakerTransition.objects.create(
                breaker_id=key,
                from_state=old.state,
                to_state=new.state,
                failures=new.failures,
                reason=reason,
                actor=actor,
                created_at=now,
            )
    return bool(changed)


def _policy(policy: BreakerPolicy) -> dict[str, float | int]:
    return {
        "threshold": policy.threshold,
        "window_seconds": policy.window.total_seconds(),
        "cooldown_seconds": policy.cooldown.total_seconds(),
    }


def breaker_note(*, key: str, state: BreakerState, now: datetime, reason: str, actor: str) -> None:
    """A transition row for an action that left the state as it was (an operator's reset of a
    closed breaker still clears its failures, and is history)."""
    BreakerTransition.objects.create(
        breaker_id=key,
        from_state=state.state,
        to_state=state.state,
        failures=state.failures,
        reason=reason,
        actor=actor,
        created_at=now,
    )
