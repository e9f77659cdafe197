"""A run's turns, read from its history (pure: rows in, turns out).

A turn is one worker's pass over the instance: from the claim that moved it to running (an
`instance.status` row, status running) to the status the worker left it in (the next
`instance.status` row: waiting, paused, complete, errored…). What the ledger keeps, whether or not
an OpenTelemetry exporter was configured. A worker that died mid-turn writes no end: the next
claim of the still-running instance writes no running row either, so the two read as one turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

RUNNING = "running"


@dataclass(frozen=True)
class Turn:
    number: int
    started: datetime
    ended: datetime | None  # None: still running
    outcome: str  # the status the turn left the instance in; "" while it runs
    late: float | None = None  # seconds between the wake-up it was due at and its start

    def seconds(self, now: datetime) -> float:
        return ((self.ended or now) - self.started).total_seconds()


def turns_of(rows: Iterable[tuple[datetime, str, Mapping[str, Any] | Any]]) -> list[Turn]:
    """The turns in an instance's `instance.status` rows (created_at, status, data), oldest first."""
    turns: list[Turn] = []
    start: datetime | None = None
    due: datetime | None = None
    late: float | None = None
    for at, status, data in rows:
        if status == RUNNING:
            if start is None:
                start = at
                late = (at - due).total_seconds() if due is not None and at >= due else None
            continue
        if start is not None:
            turns.append(Turn(len(turns) + 1, start, at, status, late))
            start = None
        until = data.get("until") if isinstance(data, Mapping) else None
        due = parse_datetime(until) if isinstance(until, str) and status == "waiting" else None
    if start is not None:
        turns.append(Turn(len(turns) + 1, start, None, "", late))
    return turns
