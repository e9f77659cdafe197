"""Circuit breakers shared by every worker: admit a call, record how it went, reset one.

    ticket = breaker_admit(key="dataforseo:main", policy=policy)   # raises CircuitOpen
    try:
        result = call()
    except Exception:
        breaker_record(ticket, ok=False)
        raise
    breaker_record(ticket, ok=True)

A closed breaker costs one indexed read per call and no write on success; only failures and
state changes write (sql/breakers.py, compare-and-swap). `ingest.sources.outbound.Circuit`
wraps this for the clients. docs/engine-contract.md, "Circuit breakers".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ingest.engine import breaker, clock
from ingest.engine.breaker import BreakerPolicy, BreakerState
from ingest.engine.errors import BreakerNotFound, CircuitOpen
from ingest.engine.models import CircuitBreaker
from ingest.engine.redaction import redact
from ingest.engine.sql import breakers as sql

# A swap loses only to another caller's change of the same row; a handful of rounds settles it.
_ROUNDS = 50


@dataclass(frozen=True)
class Ticket:
    """A call the breaker let through; `probe` when it is the half-open breaker's one probe."""

    key: str
    policy: BreakerPolicy
    tenant: str = ""
    probe: bool = False


def breaker_admit(*, key: str, policy: BreakerPolicy, tenant: str = "", now: datetime | None = None) -> Ticket:
    """Let a call go (a ticket), or raise CircuitOpen with `retry_after` without calling."""
    now = now or clock.now()
    for _ in range(_ROUNDS):
        state = sql.breaker_state(key)
        if state is None:
            return Ticket(key=key, policy=policy, tenant=tenant)
        answer = breaker.admit(state, policy, now=now)
        if not answer.go:
            raise CircuitOpen(key, answer.retry_after, state.state)
        if answer.state is None:
            return Ticket(key=key, policy=policy, tenant=tenant)
        if sql.breaker_swap(
            key=key, old=state, new=answer.state, policy=policy, now=now, reason="cooldown over: one probe call goes"
        ):
            return Ticket(key=key, policy=policy, tenant=tenant, probe=True)
    raise CircuitOpen(key, policy.cooldown.total_seconds(), "half_open")


def breaker_record(ticket: Ticket, *, ok: bool, now: datetime | None = None, error: str = "") -> None:
    """Record how an admitted call went: a failure counts (and may open the breaker), a probe's
    success closes it. A closed breaker's success writes nothing."""
    if ok and not ticket.probe:
        return  # only a probe's success changes a state (breaker.succeeded): no read, no write
    now = now or clock.now()
    for _ in range(_ROUNDS):
        state = sql.breaker_state(ticket.key)
        if ok:
            if state is None:
                return
            new = breaker.succeeded(state, probe=ticket.probe)
            if new is None:
                return
            reason = "the probe call succeeded"
        else:
            if state is None:
                sql.breaker_insert(key=ticket.key, tenant=ticket.tenant, policy=ticket.policy, now=now)
                continue
            new = breaker.failed(state, ticket.policy, now=now, probe=ticket.probe)
            if new == state:
                return
            reason = _failure_reason(state, new, ticket, error)
        if sql.breaker_swap(key=ticket.key, old=state, new=new, policy=ticket.policy, now=now, reason=reason):
            return


def breaker_reset(*, key: str, actor: str = "", reason: str = "", now: datetime | None = None) -> CircuitBreaker:
    """An operator closes the breaker: failures forgotten, calls go again. Recorded with who and why."""
    now = now or clock.now()
    for _ in range(_ROUNDS):
        state = sql.breaker_state(key)
        if state is None:
            raise BreakerNotFound(f"no circuit breaker has the key {key!r}; it may never have failed")
        why = "reset by an operator" + (f": {reason}" if reason else "")
        if sql.breaker_swap(key=key, old=state, new=BreakerState(), policy=None, now=now, reason=why, actor=actor):
            if state.state == breaker.CLOSED:  # no state change, but the reset is still history
                sql.breaker_note(key=key, state=state, now=now, reason=why, actor=actor)
            return CircuitBreaker.objects.get(key=key)
    raise BreakerNotFound(f"circuit breaker {key!r} kept changing under the reset; try again")


def _failure_reason(old: BreakerState, new: BreakerState, ticket: Ticket, error: str) -> str:
    cause = f" (last: {redact(error)[:300]})" if error else ""
    if old.state == breaker.HALF_OPEN:
        return f"the probe call failed{cause}"
    if new.state == breaker.OPEN:
        return (
            f"{new.failures} failures within {ticket.policy.window.total_seconds():g} s "
            f"reached the threshold of {ticket.policy.threshold}{cause}"
        )
    return ""
