"""An instance's own hot statements: its completion (guarded by its lease), a plain sleep's
suspension, and its row and steps read as prepared statements."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ingest.engine.sql.base import (
    HELD,
    HISTORY_COLUMNS,
    RELEASE,
    STEP_COLUMNS,
    prepared,
    prepared_row,
)

_COMPLETED = f"""
    u AS (
        UPDATE engine_instance SET status = 'complete', output = %(output)s::jsonb, ended_at = %(now)s,
            updated_at = %(now)s, ready_at = NULL, {RELEASE}, control = '', error_name = '', error_message = ''
        WHERE {HELD}
        RETURNING workflow, tenant
    )"""
_COMPLETED_HISTORY = """SELECT %(iid)s, u.workflow, u.tenant, 'instance.status', '', 'complete', '{}'::jsonb, '', '',
            %(now)s FROM u"""

COMPLETE_INSTANCE = f"""
    WITH {_COMPLETED},
    h AS (INSERT INTO {HISTORY_COLUMNS} {_COMPLETED_HISTORY})
    SELECT 1 FROM u
"""

# The same, for a run whose last step was a sleep found due in this turn: the sleep's row
# completes in the same statement.
_WAKE_ANDCOMPLETE_INSTANCE = f"""
    WITH {_COMPLETED},
    s AS (
        UPDATE engine_step SET status = 'complete', result = NULL, ended_at = %(woke_at)s
        WHERE id = %(sid)s AND EXISTS (SELECT 1 FROM u)
    ),
    h AS (
        INSERT INTO {HISTORY_COLUMNS}
        SELECT %(iid)s, u.workflow, u.tenant, 'step.completed', %(label)s, '', '{{}}'::jsonb, '', '', %(woke_at)s
        FROM u
        UNION ALL {_COMPLETED_HISTORY}
    )
    SELECT 1 FROM u
"""


def instance_complete(
    *, iid: str, token: str, now: datetime, output: str | None, woke: tuple[int, str, datetime] | None = None
) -> bool:
    """End an instance as complete with its output, releasing the lease, and write its history,
    by itself on this thread's connection: one statement, whose UPDATE is the lease guard.
    `woke`: (step id, label, when) of a sleep found due in this turn, completed in the same
    statement. False when the lease is lost."""
    params: dict[str, Any] = {"iid": iid, "token": token, "now": now, "output": output}
    if woke is None:
        return prepared_row(COMPLETE_INSTANCE, params) is not None
    params.update(sid=woke[0], label=woke[1], woke_at=woke[2])
    return prepared_row(_WAKE_ANDCOMPLETE_INSTANCE, params) is not None


@dataclass(frozen=True)
class InstanceDone:
    """An instance's completion with its output, as a group commit stores it (writes/commits.py)."""

    iid: str
    token: str
    now: datetime
    output: str | None  # JSON

    def element(self) -> str:
        head = json.dumps([self.iid, self.token, self.now.isoformat()])
        return f"{head[:-1]},{'null' if self.output is None else self.output}]"

    def write_alone(self, raw: Any) -> bool:
        return (
            prepared(
                raw, COMPLETE_INSTANCE, {"iid": self.iid, "token": self.token, "now": self.now, "output": self.output}
            )
            is not None
        )


_SLEEP_SUSPEND = f"""
    WITH u AS (
        UPDATE engine_instance SET status = 'waiting', ready_at = %(ready)s, updated_at = %(now)s, {RELEASE}
        WHERE {HELD} AND control = ''
        RETURNING workflow, tenant
    ),
    s AS (
        INSERT INTO {STEP_COLUMNS}
        SELECT %(iid)s, %(name)s, %(seq)s, %(position)s, 'sleep', 'sleeping', NULL, '', '', '', '{{}}'::jsonb,
            0, false, false, %(started)s, NULL, %(wake)s, '', NULL
        FROM u
    ),
    h AS (
        INSERT INTO {HISTORY_COLUMNS}
        SELECT %(iid)s, u.workflow, u.tenant, 'step.sleep', %(label)s, '', %(sdata)s::jsonb, '', '', %(started)s
        FROM u
        UNION ALL
        SELECT %(iid)s, u.workflow, u.tenant, 'instance.status', '', 'waiting', %(idata)s::jsonb, '', '', %(now)s
        FROM u
    )
    SELECT 1 FROM u
"""


def sleep_suspend(
    *,
    iid: str,
    token: str,
    now: datetime,
    ready_at: datetime | None,
    name: str,
    seq: int,
    position: int,
    started: datetime,
    wake_at: datetime | None,
    label: str,
) -> bool:
    """A plain sleep's step row, the instance's suspension until `ready_at` and their history, in
    one statement. False when it wrote nothing: the lease is gone or a control flag is set."""
    return (
        prepared_row(
            _SLEEP_SUSPEND,
            {
                "iid": iid,
                "token": token,
                "now": now,
                "ready": ready_at,
                "name": name,
                "seq": seq,
                "position": position,
                "started": started,
                "wake": wake_at,
                "label": label,
                "sdata": json.dumps({"until": wake_at.isoformat() if wake_at else None, "event_type": ""}),
                "idata": json.dumps({"until": ready_at.isoformat() if ready_at else None}),
            },
        )
        is not None
    )


def instance_row(iid: str, columns: Sequence[str]) -> tuple[Any, ...] | None:
    """An instance's row (the given columns, in order), as a prepared statement."""
    return prepared_row(_instance_select(tuple(columns)), {"iid": iid})


@functools.cache
def _instance_select(columns: tuple[str, ...]) -> str:
    return f"SELECT {', '.join(columns)} FROM engine_instance WHERE id = %(iid)s"
