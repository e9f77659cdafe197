"""How a step's rows are read and written, per database: through the ORM on SQLite, in prepared
statements on PostgreSQL (sql/steps.py). `InstanceStore` (store.py) calls them inside its
lease-guarded transaction (through the StepStore protocol: this module imports nothing of
store.py); nothing here checks the lease itself.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ingest.engine.models import Attempt, History, HistoryKind, Step, StepStatus
from ingest.engine.runtime import markers
from ingest.engine.runtime.policy import StepConfig
from ingest.engine.runtime.records import LeaseLost, StepRecord, step_label
from ingest.engine.sql import steps as sql_steps
from ingest.engine.sql.base import ByVendor
from ingest.engine.sql.steps import StepRead, StepRow
from ingest.engine.writes import route


@dataclass(frozen=True, slots=True)
class StepStart:
    """An attempt of a step as it starts: what its row and its record are written with."""

    name: str
    seq: int
    position: int
    kind: str
    config: StepConfig
    attempt: int
    now: datetime
    sensitive: bool
    has_rollback: bool

    def running(self, id: int, **more: Any) -> StepRecord:
        """The step's record, running this attempt since `now`."""
        return StepRecord(
            id=id,
            name=self.name,
            seq=self.seq,
            position=self.position,
            kind=self.kind,
            status=StepStatus.RUNNING,
            attempts=self.attempt,
            started_at=self.now,
            **more,
        )


class StepStore(Protocol):
    """What a step's writes need of the turn's store (store.py's InstanceStore, which calls them):
    its lease, its guarded transaction and history rows, and its barrier of deferred completions."""

    instance_id: str
    token: str
    worker: str
    control: str
    deferred: list[Callable[[], None]]

    def txn(self, now: datetime) -> AbstractContextManager[None]: ...

    def history(self, kind: str, now: datetime, *, step_name: str = "", status: str = "", **data: Any) -> History: ...

    def settle(self) -> None: ...

    def settle_marker(self, rec: StepRecord) -> bool: ...

    def queue_completion(self, rec: StepRecord, handle: Any) -> None: ...


class _OrmStepWrites:
    """SQLite: a step's rows are read and written through the ORM, each write in the store's
    guarded transaction."""

    def load(self, instance_id: str) -> list[StepRecord]:
        rows = Step.objects.filter(instance_id=instance_id).order_by("position").values_list(*StepRead._fields)
        return [StepRecord(**StepRead._make(row)._asdict()) for row in rows]

    def first_attempt(
        self,
        store: StepStore,
        start: StepStart,
    ) -> StepRecord | None:
        """A first attempt's record when its row is left to its completion; None: write it now."""
        return None

    def completed(
        self,
        store: StepStore,
        rec: StepRecord,
        *,
        attempt: int,
        started: datetime,
        now: datetime,
        result: Any,
        encoded: str | None,
        deferred: bool,
        logs: str | None,
    ) -> None:
        with store.txn(now):
            Step.objects.filter(id=rec.id).update(
                status=StepStatus.COMPLETE,
                result=result,
                ended_at=now,
                attempts=attempt,
                error_name="",
                error_message="",
                error_traceback="",
                live_log=None,
            )
            Attempt.objects.create(
                step_id=rec.id,
                number=attempt,
                started_at=started,
                ended_at=now,
                ok=True,
                worker=store.worker,
                logs=attempt_logs(logs),
            )
            store.history(
                HistoryKind.STEP_COMPLETED,
                now,
                step_name=step_label(rec.name, rec.seq),
                attempt=attempt,
                ms=round((now - started).total_seconds() * 1000, 3),
            )
        rec.status, rec.result = StepStatus.COMPLETE, result


def _from_json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


# Kept on purpose: this class overrides every method of _OrmStepWrites with PostgreSQL's
# statements, so each override repeats its parent's signature (the two are one interface, chosen
# once by step_writes below).
class _StatementStepWrites(_OrmStepWrites):
    """PostgreSQL: prepared statements, and a completion through the group commit (route.py)."""

    def load(self, instance_id: str) -> list[StepRecord]:
        # Prepared, without the ORM: this runs at every turn. jsonb arrives as text here.
        return [
            StepRecord(**r._replace(result=_from_json(r.result), error_state=_from_json(r.error_state))._asdict())
            for r in sql_steps.step_rows(instance_id)
        ]

    def first_attempt(
        self,
        store: StepStore,
        start: StepStart,
    ) -> StepRecord | None:
        # The first attempt writes nothing yet: its completion inserts the row, unless it
        # runs long enough for its start marker to be written first (markers.py).
        row = StepRow(
            iid=store.instance_id,
            name=start.name,
            seq=start.seq,
            position=start.position,
            kind=start.kind,
            config=start.config.json_text,
            sensitive=start.sensitive,
            has_rollback=start.has_rollback,
            label=step_label(start.name, start.seq),
        )
        marker = markers.schedule(row=row, token=store.token, started=start.now, attempt=start.attempt)
        return start.running(0, row=row, marker=marker)

    def completed(
        self,
        store: StepStore,
        rec: StepRecord,
        *,
        attempt: int,
        started: datetime,
        now: datetime,
        result: Any,
        encoded: str | None,
        deferred: bool,
        logs: str | None,
    ) -> None:
        if not deferred:
            store.settle()
        with_start = store.settle_marker(rec)
        row = rec.row or StepRow(
            iid=store.instance_id,
            name=rec.name,
            seq=rec.seq,
            position=rec.position,
            kind=rec.kind,
            config="{}",
            sensitive=False,
            has_rollback=False,
            label=step_label(rec.name, rec.seq),
        )
        finish = functools.partial(
            route.step_finish,
            row=row,
            token=store.token,
            now=now,
            started=started,
            attempt=attempt,
            result=None if result is None else (encoded if encoded is not None else json.dumps(result)),
            worker=store.worker,
            with_start=with_start,
            logs=logs,
        )
        handle = route.step_finish_deferred(**finish.keywords) if deferred and not store.deferred else None
        if handle is not None:
            store.queue_completion(rec, handle)
            rec.status, rec.result, rec.row = StepStatus.COMPLETE, result, None
            return
        if store.deferred:
            # The guard, the deferred writes and their history rows, then this statement: one
            # transaction.
            with store.txn(now):
                got = finish()
                if got is None:
                    raise LeaseLost(store.instance_id)
        else:
            got = finish()  # announces its history rows (route.py)
        if got is None:
            raise LeaseLost(store.instance_id)
        store.control, rec.id = got
        rec.status, rec.result, rec.row = StepStatus.COMPLETE, result, None


step_writes = ByVendor[_OrmStepWrites](postgresql=_StatementStepWrites(), sqlite=_OrmStepWrites())


def attempt_logs(logs: str | None) -> Any:
    """An attempt's lines as the ORM stores them (the hot statements take the JSON text as is)."""
    return None if logs is None else json.loads(logs)
