"""The scheduled pulls' cursors: which window a pull asks for (pure), and the writes that hold,
advance and report a pull (`ConnectionCursor`).

A pull asks for [cursor - lookback, min(now, that + max window)): the lookback re-reads what
the provider may have listed late (Gong lists a call by its start time only once the recording
is processed; a Salesforce transaction commits after it stamped its records), and starting an
instance that exists is a no-op, so reading a stretch twice costs requests, never a second
ingest. The cursor moves to the window's end only after everything in the window was started,
and only forward, so any number of pulls on any number of workers can overlap safely; the hold
only keeps a second pull from spending the provider's rate limit on the same window.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import DateTimeField, Q, Value
from django.db.models.functions import Coalesce, Greatest

from ingest.engine import redact
from ingest.pipelines.models import ConnectionCursor


@dataclass(frozen=True)
class Window:
    """[start, end): the stretch of start times (Gong) or modification stamps (Salesforce) one
    pull reads."""

    start: datetime
    end: datetime


def pull_window(*, cursor: datetime | None, now: datetime, lookback: timedelta, max_window: timedelta) -> Window:
    """The window of the next pull. Without a cursor (the first pull) it reads the lookback
    before `now`, never the connection's history (`manage.py ingest_pull` backfills that). A
    cursor far behind (the pulls were off) is caught up `max_window` at a time."""
    if max_window <= lookback:
        raise ValueError(
            f"a pull's largest window ({max_window}) must be longer than its lookback "
            f"({lookback}), or the cursor could never move"
        )
    start = min(cursor or now, now) - lookback
    return Window(start, min(now, start + max_window))


LOOKBACK_OPTION = "reconcile_lookback_minutes"  # a connection's own lookback, in whole minutes
MOST_LOOKBACK_MINUTES = 1439  # under a day: the largest window, or the cursor could not move


def lookback_minutes_check(value: object, *, what: str) -> int:
    """`value` as a lookback in minutes, or ValueError naming `what` it is."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MOST_LOOKBACK_MINUTES:
        raise ValueError(
            f"{what} is {str(value)[:40]!r}; it is a whole number of minutes from 1 to {MOST_LOOKBACK_MINUTES}"
        )
    return value


def cursor_claim(*, connection_id: int, holder: str, now: datetime, hold: timedelta) -> ConnectionCursor | None:
    """Hold the connection's pull for `holder` until `now + hold`: its cursor row (made on the
    first pull), or None while another holder's hold lasts. The same holder may claim again (a
    step that runs a second time after its worker died)."""
    ConnectionCursor.objects.get_or_create(connection_id=connection_id, defaults={"updated_at": now})
    free = Q(held_until__isnull=True) | Q(held_until__lte=now) | Q(holder=holder)
    # One conditional UPDATE: of two pulls racing for the row, the second sees the first's hold.
    taken = ConnectionCursor.objects.filter(free, pk=connection_id).update(
        holder=holder, held_until=now + hold, updated_at=now
    )
    return ConnectionCursor.objects.get(pk=connection_id) if taken else None


def cursor_advance(
    *, connection_id: int, holder: str, window: Window, listed: int, started: int, now: datetime
) -> None:
    """Everything in `window` was started: the cursor moves to its end (never back: a slower
    pull of an older window leaves a newer cursor as it is), the error is cleared, the hold
    released."""
    end = Value(window.end, output_field=DateTimeField())
    with transaction.atomic():
        ConnectionCursor.objects.filter(pk=connection_id).update(
            cursor=Greatest(Coalesce("cursor", end), end),
            window_start=window.start,
            window_end=window.end,
            listed=listed,
            started=started,
            last_pull_at=now,
            last_success_at=now,
            last_error="",
            last_error_at=None,
            updated_at=now,
        )
        _release(connection_id, holder)


def cursor_fail(*, connection_id: int, holder: str, error: str, now: datetime) -> None:
    """The pull stopped before the end of its window: the cursor stays where it was (what the
    pull started is kept; the next pull finds it started), the error is shown, the hold released."""
    with transaction.atomic():
        ConnectionCursor.objects.filter(pk=connection_id).update(
            last_pull_at=now, last_error=redact(error)[:2000], last_error_at=now, updated_at=now
        )
        _release(connection_id, holder)


def _release(connection_id: int, holder: str) -> None:
    ConnectionCursor.objects.filter(pk=connection_id, holder=holder).update(holder="", held_until=None)
