"""A step attempt's call journal: a paid call is paid once, and its cost booked once.

A worker that dies between a paid call's answer and its step's completion would make the retry
pay again. So every paid client (the shared plumbing of `ingest.sources`) asks the running
attempt's journal first:

- `call(fingerprint)` gives the call its ordinal in the step (1, 2, … in the order the calls are
  made) and, when a lost run of this step was answered at that ordinal for the same question
  (`fingerprint`), that answer: the client hands it back without sending anything;
- `record(slot, …)` writes an answer as soon as it arrives, in one statement committed on its own
  (sql/journal.py), before the client hands it to the step (sealed when the step is sensitive);
- once an attempt has made a paid call, the costs it books are journaled too, each in the
  statement (PostgreSQL) or transaction (SQLite) of its api_costs row (costs/record.py), so a
  replay books none of them twice.

Which rows an attempt replays: those of its own attempt number (a run that died before its start
was written reruns as the same attempt) and those of the attempt it found lost mid-run, which it
takes over when it starts (`journal_adopt`). An attempt that ended, failed or completed, hands
nothing on: a retry after a failure asks the provider afresh, as retrying is meant to. The replay
stops at the first row that asked another question (the step took another path this time): from
there every call goes out and its row is written anew.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ingest.engine import clock
from ingest.engine.models import CallJournal, JournalKind
from ingest.engine.runtime.records import ledger_io
from ingest.engine.secrets import seal_value, unseal_value
from ingest.engine.sql.base import ByVendor
from ingest.engine.sql.journal import journal_write

# DataForSEO takes a task `tag` of at most 255 characters; a longer key is sent as its digest.
PROVIDER_KEY_CHARS = 255


def fingerprint_of(*parts: Any) -> str:
    """A digest of what a call asked (or a booking said), to tell the same question from another."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def provider_key(key: str, attempt: int, ordinal: int) -> str:
    """What a provider gets as a call's idempotency key or task tag: `<key>#<attempt>.<ordinal>`.

    The same for a run of the same attempt (one that died before its start was written is run
    again as that attempt), so a provider that deduplicates answers it once; another for the next
    attempt, which is meant to ask afresh (an attempt that failed on a blank answer must not be
    handed that answer again)."""
    suffix = f"#{attempt}.{ordinal}"
    if len(key) + len(suffix) <= PROVIDER_KEY_CHARS:
        return key + suffix
    return hashlib.sha256(key.encode()).hexdigest() + suffix


class _Journaled(NamedTuple):
    """What the journal holds at one ordinal of an attempt (the columns read, by name)."""

    kind: str
    fingerprint: str
    answer: Any


@dataclass(frozen=True)
class Slot:
    """One call or booking of an attempt: its ordinal and, when replayed, what the journal holds."""

    ordinal: int
    kind: str
    fingerprint: str
    provider_key: str
    replayed: bool = False
    answer: Any = None


# One lock for every attempt's ordinals: it is taken once per paid call, and every step attempt
# makes a journal, most without a paid call, so a lock of its own each would cost them all.
_ordinals = threading.Lock()


class StepJournal:
    """The journal of one step attempt (thread-safe: a step may call from several threads, though
    its calls then take ordinals in whatever order they come)."""

    __slots__ = ("_in_sync", "_ordinal", "_rows", "active", "attempt", "instance_id", "key", "sensitive", "tenant")

    def __init__(self, *, key: str, instance_id: str, tenant: str, attempt: int, sensitive: bool) -> None:
        self.key = key
        self.instance_id = instance_id
        self.tenant = tenant
        self.attempt = attempt
        self.sensitive = sensitive
        self._ordinal = 0
        self._rows: dict[int, _Journaled] | None = None
        self._in_sync = True
        self.active = False  # a paid call was made (or replayed) in this attempt

    def call(self, fingerprint: str) -> Slot:
        """The next paid call's slot; `replayed` with the journaled answer when there is one."""
        return self._next(JournalKind.CALL, fingerprint)

    def cost(self, fingerprint: str) -> Slot | None:
        """The next booking's slot once the attempt has made a paid call; None before."""
        return self._next(JournalKind.COST, fingerprint) if self.active else None

    def _next(self, kind: str, fingerprint: str) -> Slot:
        with _ordinals:
            self.active = True
            self._ordinal += 1
            ordinal = self._ordinal
        rows = self._rows
        if rows is None:  # read outside the lock; two threads of one step may both read it: the same rows
            found_rows = CallJournal.objects.filter(key=self.key, attempt=self.attempt).values_list(
                "ordinal", *_Journaled._fields
            )
            rows = self._rows = {ordinal: _Journaled(*rest) for ordinal, *rest in found_rows}
        with _ordinals:
            found = rows.get(ordinal) if self._in_sync else None
            if found is not None and (found.kind, found.fingerprint) != (kind, fingerprint):
                self._in_sync = False  # another path than the lost run took: nothing further replays
                found = None
        sent_as = provider_key(self.key, self.attempt, ordinal)
        if found is None:
            return Slot(ordinal=ordinal, kind=kind, fingerprint=fingerprint, provider_key=sent_as)
        return Slot(
            ordinal=ordinal,
            kind=kind,
            fingerprint=fingerprint,
            provider_key=sent_as,
            replayed=True,
            answer=unseal_value(found.answer),
        )

    def record(self, slot: Slot, *, provider: str, answer: Any) -> None:
        """Write `answer` for `slot`, committed at once (or with the transaction the caller holds).
        A row an earlier attempt left at this ordinal is replaced."""
        _write()(self.entry(slot, provider=provider, answer=answer))

    def entry(self, slot: Slot, *, provider: str, answer: Any) -> dict[str, Any]:
        """The row `record` writes, as the parameters of sql/journal.py (a cost's record writes it
        in its own statement: costs/record.py)."""
        return {
            "j_instance": self.instance_id,
            "j_key": self.key,
            "j_ordinal": slot.ordinal,
            "j_attempt": self.attempt,
            "j_kind": slot.kind,
            "j_provider": provider[:100],
            "j_fingerprint": slot.fingerprint,
            "j_answer": json.dumps(seal_value(answer) if self.sensitive else answer),
            "j_now": clock.now(),
        }


def journal_write_orm(entry: dict[str, Any]) -> None:
    """`sql.journal.journal_write` through the ORM (SQLite)."""
    row = CallJournal(
        instance_id=entry["j_instance"],
        key=entry["j_key"],
        ordinal=entry["j_ordinal"],
        attempt=entry["j_attempt"],
        kind=entry["j_kind"],
        provider=entry["j_provider"],
        fingerprint=entry["j_fingerprint"],
        answer=json.loads(entry["j_answer"]),
        created_at=entry["j_now"],
    )
    CallJournal.objects.bulk_create(
        [row],
        update_conflicts=True,
        unique_fields=["key", "ordinal"],
        update_fields=["attempt", "kind", "provider", "fingerprint", "answer", "created_at"],
    )


_write = ByVendor[Callable[[dict[str, Any]], None]](postgresql=journal_write, sqlite=journal_write_orm)


@ledger_io
def journal_adopt(*, key: str, lost: int, attempt: int) -> int:
    """Attempt `attempt` takes over what lost attempt `lost` of the step journaled; how many rows."""
    return CallJournal.objects.filter(key=key, attempt=lost).update(attempt=attempt)


_current: contextvars.ContextVar[StepJournal | None] = contextvars.ContextVar("runledger_call_journal", default=None)


def call_journal_current() -> StepJournal | None:
    """The journal of the step attempt running in this thread or task; None outside a step."""
    return _current.get()


class bound:  # noqa: N801 - a context manager used as a function, as logcontext.bind
    """`call_journal_current()` is `journal` inside the block."""

    __slots__ = ("_journal", "_token")

    def __init__(self, journal: StepJournal | None) -> None:
        self._journal = journal
        self._token: contextvars.Token[StepJournal | None] | None = None

    def __enter__(self) -> None:
        self._token = _current.set(self._journal)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._token = None
