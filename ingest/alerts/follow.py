"""The event-driven half of alerting: follow the history table, where the engine already writes
every instance's end and every approval, and act on the rows that matter. Nothing is added to
the step's hot path: the engine writes what it wrote before, and this reads it afterwards.

History ids come from a sequence, so a transaction holding id 41 can commit after one holding 42;
ids below the cursor that were missing are remembered for a while and read again (as the
dashboard's live feed does). A round runs in one transaction holding the state row's lock, so
two followers never act on the same rows, and a round that fails is rolled back whole.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import BooleanField, Case, F, JSONField, Max, Q, Value, When

from ingest.alerts.callbacks import callback_start
from ingest.alerts.conditions import (
    COMPLETED_WITH_ERRORS,
    EVENT_CONDITIONS,
    Clear,
    Signal,
    history_signals,
)
from ingest.alerts.delivery import delivery_failed
from ingest.alerts.firing import clear_handle, signal_handle
from ingest.alerts.models import Callback, Condition, FollowState, Rule
from ingest.engine.models import DeadLetter, DeadLetterState, History

log = logging.getLogger("runledger.alerts")
BATCH = 50  # rows acted on per round (a committed transaction each)
SCAN = 5000  # history ids a round may pass over (steps, costs: rows no alert reads)
GAP_SECONDS = 60.0
MAX_GAPS = 1000
ENDED = frozenset({"complete", "errored", "terminated", COMPLETED_WITH_ERRORS})
DELIVERIES = frozenset({"alert-deliver", "callback-deliver"})


@dataclass(frozen=True)
class Advance:
    cursor: int
    gaps: dict[str, float]


def advance(*, cursor: int, gaps: dict[str, float], seen: list[int], now: float) -> Advance:
    """The new cursor and gaps after reading `seen` (sorted ids above the cursor or in the gaps).
    Pure: ids skipped between cursor and the highest seen become gaps; gaps seen or older than
    GAP_SECONDS are dropped."""
    kept = {k: v for k, v in gaps.items() if int(k) not in set(seen) and now - v < GAP_SECONDS}
    top = cursor
    for i in seen:
        if i > top:
            for missing in range(top + 1, i):
                kept[str(missing)] = now
            top = i
    if len(kept) > MAX_GAPS:
        kept = dict(sorted(kept.items(), key=lambda kv: int(kv[0]))[-MAX_GAPS:])
    return Advance(top, kept)


def follow_start(*, now: datetime) -> FollowState:
    """The state row, created at the history's end: alerts begin with what happens from now on."""
    top = History.objects.aggregate(top=Max("id"))["top"] or 0
    state, _ = FollowState.objects.get_or_create(id=1, defaults={"cursor": top, "updated_at": now})
    return state


@dataclass
class Round:
    """What a round looks up once: the enabled rules by (condition, tenant), the instances of the
    batch that carry a callback."""

    rules: dict[tuple[str, str], list[Rule]]
    callbacks: set[str]

    def rules_for(self, condition: str, tenant: str) -> list[Rule]:
        return self.rules.get((condition, tenant), [])


def _round_of(rows: list[dict[str, Any]]) -> Round:
    rules: dict[tuple[str, str], list[Rule]] = {}
    for rule in Rule.objects.filter(enabled=True, condition__in=list(EVENT_CONDITIONS)):
        rules.setdefault((rule.condition, rule.tenant), []).append(rule)
    ended = [r["instance_id"] for r in rows if r["kind"] == "instance.status" and r["status"] in ENDED]
    callbacks = (
        set(Callback.objects.filter(instance_id__in=ended).values_list("instance_id", flat=True)) if ended else set()
    )
    return Round(rules, callbacks)


def follow_round(*, now: datetime) -> int:
    """Read the next history rows (at most BATCH acted on) and act on them; how many rows were read.
    Small batches, each committed, let the deliveries of a burst start while it is still read."""
    follow_start(now=now)
    with transaction.atomic():
        state = FollowState.objects.select_for_update().get(id=1)
        rows, seen = round_rows(cursor=state.cursor, gaps=state.gaps)
        found = _round_of(rows)
        for row in rows:
            _act(row, found, now=now)
        moved = advance(cursor=state.cursor, gaps=state.gaps, seen=seen, now=now.timestamp())
        FollowState.objects.filter(id=1).update(cursor=moved.cursor, gaps=moved.gaps, updated_at=now)
    return len(seen)


def round_rows(*, cursor: int, gaps: dict[str, float]) -> tuple[list[dict[str, Any]], list[int]]:
    """The rows a round acts on and every id it read (which the cursor may then pass), from one
    statement. Two statements — the rows to act on, then the ids seen — let a row that committed
    between them count as seen without being acted on: under READ COMMITTED each statement has a
    snapshot of its own. One statement reads one snapshot, so every id the cursor passes over was
    either acted on or is of a kind no alert reads. Rows of other kinds carry no data (a step's
    result can be large); they only move the cursor."""
    wanted = Q(id__gt=cursor)
    if gaps:
        wanted |= Q(id__in=[int(g) for g in gaps])
    relevant = Q(kind="approval") | Q(kind="instance.status", status__in=list(ENDED))
    query = (
        History.objects.filter(wanted)
        .order_by("id")
        .annotate(
            acts=Case(When(relevant, then=Value(True)), default=Value(False), output_field=BooleanField()),
            payload=Case(When(relevant, then=F("data")), default=Value(None), output_field=JSONField()),
        )
        .values("id", "acts", "kind", "status", "workflow", "tenant", "instance_id", "step_name", "payload")[:SCAN]
    )
    rows: list[dict[str, Any]] = []
    seen: list[int] = []
    for found in query:
        seen.append(found["id"])
        if found["acts"]:
            row: dict[str, Any] = {k: v for k, v in found.items() if k not in ("acts", "payload")}
            row["data"] = found["payload"]
            rows.append(row)
            if len(rows) == BATCH:  # the round stops at its last row acted on
                break
    return rows, seen


def _act(row: dict[str, Any], found: Round, *, now: datetime) -> None:
    try:
        with transaction.atomic():  # one bad row must not undo the round's others
            _act_on(row, found, now=now)
    except Exception:
        log.exception(
            "alerts: history row %s (%s %s of %s) could not be handled",
            row["id"],
            row["kind"],
            row["status"],
            row["instance_id"],
        )


def _act_on(row: dict[str, Any], found: Round, *, now: datetime) -> None:
    ended = row["kind"] == "instance.status" and row["status"] in ENDED
    if ended and row["workflow"] in DELIVERIES:
        if row["status"] == "errored":
            message = (row.get("data") or {}).get("message", "")
            delivery_failed(workflow=row["workflow"], instance_id=row["instance_id"], message=message)
        if row["workflow"] == "alert-deliver":
            return
    if ended and row["instance_id"] in found.callbacks:
        callback_start(instance_id=row["instance_id"])
    for what in history_signals(row):
        if isinstance(what, Clear):
            if found.rules_for(what.condition, what.tenant):
                clear_handle(what, now=now)
        elif rules := found.rules_for(what.condition, what.tenant):
            signal_handle(what, now=now, rules=rules)
    if ended and row["status"] == "errored":
        rules = found.rules_for(Condition.DEAD_LETTER_NEW_SIGNATURE, row["tenant"])
        new = _new_signature(row) if rules else None
        if new is not None:
            signal_handle(new, now=now, rules=rules)


def _new_signature(row: dict[str, Any]) -> Signal | None:
    """A dead letter whose signature no earlier open dead letter of its tenant has (earlier:
    by the time the follower reads the row, later letters of a storm may already be there)."""
    letter = DeadLetter.objects.filter(instance_id=row["instance_id"], state=DeadLetterState.OPEN).first()
    if letter is None:
        return None
    others = DeadLetter.objects.filter(
        tenant=letter.tenant, signature=letter.signature, state=DeadLetterState.OPEN, id__lt=letter.id
    ).exists()
    if others:
        return None
    facts = {
        "instance": letter.instance_id,
        "step": letter.step_name,
        "error": letter.error_name,
        "message": letter.error_message[:500],
        "signature": letter.signature,
    }
    return Signal(
        Condition.DEAD_LETTER_NEW_SIGNATURE,
        letter.tenant,
        f"signature:{letter.signature}",
        f"new error in {letter.workflow}: {letter.error_name}",
        letter.workflow,
        facts,
    )
