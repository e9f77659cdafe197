"""The step hot path on PostgreSQL: one round trip per step.

A step that finishes quickly costs one statement: the guard, the step row (inserted complete),
its attempt and its history rows, as data-modifying CTEs in one implicit transaction. A step
that runs longer gets a start marker first (runtime/markers.py), written by another thread; the
completion then updates that row (ON CONFLICT). The statements are prepared on the server
(their text never changes; only the parameters do), which spares PostgreSQL parsing and
planning five CTEs per step. When the lease is lost the guard returns no row and nothing is
written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection

from ingest.engine.sql.base import STEP_COLUMNS, kept_cursor, prepared

_GUARD = """
    g AS (
        SELECT control, workflow, tenant FROM engine_instance
        WHERE id = %(iid)s AND lease_token = %(token)s AND lease_expires_at > %(now)s
        FOR SHARE
    )"""

# A completion's step row meets its start marker's (or an earlier attempt's): it becomes complete.
COMPLETE_ON_CONFLICT = """ON CONFLICT (instance_id, name, seq) DO UPDATE SET
            status = 'complete', result = EXCLUDED.result, ended_at = EXCLUDED.ended_at,
            attempts = EXCLUDED.attempts, error_name = '', error_message = '', error_traceback = '',
            wake_at = NULL, live_log = NULL"""

_MARK_STARTED = f"""
    WITH {_GUARD},
    c AS (SELECT set_config('synchronous_commit', 'off', true) AS v),
    s AS (
        INSERT INTO {STEP_COLUMNS}
        SELECT %(iid)s, %(name)s, %(seq)s, %(position)s, %(kind)s, 'running', NULL, '', '', '',
            %(config)s::jsonb, %(attempt)s, %(sensitive)s, %(has_rollback)s, %(started)s, NULL, NULL, '', NULL
        FROM g
        ON CONFLICT (instance_id, name, seq) DO NOTHING
        RETURNING id
    ),
    h AS (
        INSERT INTO engine_history (instance_id, workflow, tenant, kind, step_name, status, data,
                                    actor, reason, created_at)
        SELECT %(iid)s, g.workflow, g.tenant, 'step.started', %(label)s, '', %(hdata)s::jsonb, '', '', %(started)s
        FROM g CROSS JOIN s
    )
    SELECT s.id, (SELECT v FROM c) FROM g CROSS JOIN s
"""

_FINISH_TEMPLATE = f"""
    WITH {_GUARD},
    s AS (
        INSERT INTO {STEP_COLUMNS}
        SELECT %(iid)s, %(name)s, %(seq)s, %(position)s, %(kind)s, 'complete', %(result)s::jsonb, '', '', '',
            %(config)s::jsonb, %(attempt)s, %(sensitive)s, %(has_rollback)s, %(started)s, %(now)s, NULL, '', NULL
        FROM g
        {COMPLETE_ON_CONFLICT}
        RETURNING id
    ),
    a AS (
        INSERT INTO engine_attempt (step_id, number, started_at, ended_at, ok, error_name,
            error_message, error_traceback, retry_delay_seconds, worker, logs)
        SELECT s.id, %(attempt)s, %(started)s, %(now)s, true, '', '', '', NULL, %(worker)s, %(logs)s::jsonb FROM s
    ),
    h AS (
        INSERT INTO engine_history (instance_id, workflow, tenant, kind, step_name, status, data,
                                    actor, reason, created_at)
        {{history}}
    )
    SELECT g.control, s.id FROM g CROSS JOIN s
"""


_COMPLETED_ROW = """SELECT %(iid)s, g.workflow, g.tenant, 'step.completed', %(label)s, '', %(hdata)s::jsonb,
            '', '', %(now)s FROM g"""
# The completion of a step whose start marker was never written carries its step.started row too.
_FINISH = _FINISH_TEMPLATE.replace("{history}", _COMPLETED_ROW)
_FINISH_WITH_START = _FINISH_TEMPLATE.replace(
    "{history}",
    f"""
        SELECT %(iid)s, g.workflow, g.tenant, 'step.started', %(label)s, '', %(hstart)s::jsonb, '', '', %(started)s
        FROM g
        UNION ALL {_COMPLETED_ROW}""",
)


@dataclass(frozen=True)
class StepRow:
    """What the hot-path statements need of a step, beside its outcome."""

    iid: str
    name: str
    seq: int
    position: int
    kind: str
    config: str  # JSON
    sensitive: bool
    has_rollback: bool
    label: str

    def params(self) -> dict[str, Any]:
        return {
            "iid": self.iid,
            "name": self.name,
            "seq": self.seq,
            "position": self.position,
            "kind": self.kind,
            "config": self.config,
            "sensitive": self.sensitive,
            "has_rollback": self.has_rollback,
            "label": self.label,
        }


def step_mark_started(
    raw: Any, *, row: StepRow, token: str, now: datetime, started: datetime, attempt: int
) -> int | None:
    """Write a running step's start marker (its row and its step.started history) on `raw`, a
    psycopg connection in autocommit, without waiting for the WAL flush: a marker lost in a
    database crash costs nothing. Returns the step id, or None when nothing was written (the
    lease is gone, or the step's row exists already)."""
    got = prepared(
        raw,
        _MARK_STARTED,
        {
            **row.params(),
            "token": token,
            "now": now,
            "started": started,
            "attempt": attempt,
            "hdata": json.dumps({"attempt": attempt}),
        },
    )
    return None if got is None else int(got[0])


def step_finish(
    *,
    row: StepRow,
    token: str,
    now: datetime,
    started: datetime,
    attempt: int,
    result: str | None,
    worker: str,
    with_start: bool,
    logs: str | None = None,
) -> tuple[str, int] | None:
    """Store a step's successful attempt durably in one statement, by itself on this thread's
    Django connection: its row (inserted, or updated when a start marker exists), the attempt
    with what it logged (`logs`, JSON; None when nothing) and the history (`with_start`: the
    step.started row too, for a step whose marker was never written). Returns (control, step
    id), or None when the lease is lost."""
    completion = Completion(
        row=row,
        token=token,
        now=now,
        started=started,
        attempt=attempt,
        result=result,
        worker=worker,
        with_start=with_start,
        logs=logs,
    )
    connection.ensure_connection()
    with connection.wrap_database_errors:
        return completion.write_alone(connection.connection)


@dataclass(frozen=True)
class Completion:
    """A step's successful attempt, as a group commit stores it (writes/commits.py)."""

    row: StepRow
    token: str
    now: datetime
    started: datetime
    attempt: int
    result: str | None  # JSON
    worker: str
    with_start: bool
    logs: str | None = None  # JSON: what the attempt logged (runtime/steplog.py)

    @property
    def iid(self) -> str:
        return self.row.iid

    def element(self) -> str:
        """This completion as one element of _GROUP_WRITE's JSON array of steps."""
        row = self.row
        ms = round((self.now - self.started).total_seconds() * 1000, 3)
        head = json.dumps(
            [
                row.iid,
                self.token,
                row.name,
                row.seq,
                row.position,
                row.kind,
                self.attempt,
                row.sensitive,
                row.has_rollback,
                self.started.isoformat(),
                self.now.isoformat(),
                row.label,
                ms,
                self.with_start,
                self.worker,
            ]
        )
        return (
            f"{head[:-1]},{row.config},{'null' if self.result is None else self.result},"
            f"{'null' if self.logs is None else self.logs}]"
        )

    def write_alone(self, raw: Any) -> tuple[str, int] | None:
        """This completion by itself, with the one-step statement (a lock on one row cannot
        take part in a deadlock, and the statement is cheaper than a group's for one row)."""
        ms = round((self.now - self.started).total_seconds() * 1000, 3)
        params = {
            **self.row.params(),
            "token": self.token,
            "now": self.now,
            "started": self.started,
            "attempt": self.attempt,
            "result": self.result,
            "worker": self.worker,
            "logs": self.logs,
            "hdata": json.dumps({"attempt": self.attempt, "ms": ms}),
        }
        if self.with_start:
            params["hstart"] = json.dumps({"attempt": self.attempt})
        got = prepared(raw, _FINISH_WITH_START if self.with_start else _FINISH, params)
        return None if got is None else (str(got[0]), int(got[1]))


class StepRead(NamedTuple):
    """A step's row as a turn reads it back (`step_rows`): its columns by name, in the order the
    statement selects them (the statement is built from these names). `result` and
    `error_state` are JSON text as they arrive here; the ORM's read decodes them. Its first
    fields repeat runtime/records.py's StepRecord on purpose: this layer imports nothing above it,
    and the record is what the turn keeps."""

    id: int
    name: str
    seq: int
    position: int
    kind: str
    status: str
    result: Any
    error_name: str
    error_message: str
    attempts: int
    wake_at: datetime | None
    event_type: str
    child_id: str | None
    started_at: datetime | None
    error_state: Any


_STEP_ROWS = f"""
    SELECT {", ".join(StepRead._fields)}
    FROM engine_step WHERE instance_id = %(iid)s ORDER BY position
"""


def step_rows(iid: str) -> list[StepRead]:
    """An instance's steps in the order the run asked for them (prepared; results as JSON text)."""
    connection.ensure_connection()
    with connection.wrap_database_errors:
        cursor = kept_cursor(connection.connection, _STEP_ROWS)
        cursor.execute(_STEP_ROWS, {"iid": iid}, prepare=True)
        return list(map(StepRead._make, cursor.fetchall()))
