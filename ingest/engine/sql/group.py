"""The group commit's statement.

A group commit's writes in one statement (writes/commits.py): the completions of several
instances' steps (the same writes as _FINISH / _FINISH_WITH_START) and the completions of instances (as
COMPLETE_INSTANCE), each list sent as one JSON array of arrays (one json.dumps in C, where
sixteen typed arrays cost a Python dumper per element: a third of the worker's time per step).
Every instance row involved is locked first, in id order, as the heartbeat locks them, so two
batches and a heartbeat never wait on each other in a cycle. A write whose lease is lost
matches no instance row and writes nothing; it is missing from the rows returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ingest.engine.sql.base import HISTORY_COLUMNS, RELEASE, STEP_COLUMNS, kept_cursor
from ingest.engine.sql.instances import InstanceDone
from ingest.engine.sql.steps import COMPLETE_ON_CONFLICT, Completion


class _Written(NamedTuple):
    """A row of the group statement: a step written (its instance, name and occurrence, the
    instance's control and the step's id), or an instance completed (its id, the rest NULL)."""

    iid: str
    name: str | None
    seq: int | None
    control: str | None
    step_id: int | None


_GROUP_TEMPLATE = f"""
    WITH i AS (
        SELECT e->>0 AS iid, e->>1 AS token, e->>2 AS name, (e->>3)::int AS seq, (e->>4)::int AS position,
            e->>5 AS kind, (e->>6)::int AS attempt, (e->>7)::bool AS sensitive, (e->>8)::bool AS has_rollback,
            (e->>9)::timestamptz AS started, (e->>10)::timestamptz AS now, e->>11 AS label,
            (e->>12)::float8 AS ms, (e->>13)::bool AS with_start, e->>14 AS worker, e->15 AS config,
            CASE WHEN jsonb_typeof(e->16) = 'null' THEN NULL ELSE e->16 END AS result,
            CASE WHEN jsonb_typeof(e->17) = 'null' THEN NULL ELSE e->17 END AS logs
        FROM jsonb_array_elements(%(steps)s::jsonb) AS e
    ),{{done}}
    g AS (
        SELECT id, control, workflow, tenant, lease_token, lease_expires_at FROM engine_instance
        WHERE id = ANY(ARRAY(SELECT iid FROM i{{done_ids}})) ORDER BY id FOR NO KEY UPDATE
    ),
    v AS (
        SELECT i.*, g.control, g.workflow, g.tenant FROM i
        JOIN g ON g.id = i.iid AND g.lease_token = i.token AND g.lease_expires_at > i.now
    ),
    s AS (
        INSERT INTO {STEP_COLUMNS}
        SELECT v.iid, v.name, v.seq, v.position, v.kind, 'complete', v.result, '', '', '',
            v.config, v.attempt, v.sensitive, v.has_rollback, v.started, v.now, NULL, '', NULL
        FROM v
        {COMPLETE_ON_CONFLICT}
        RETURNING id, instance_id, name, seq
    ),
    a AS (
        INSERT INTO engine_attempt (step_id, number, started_at, ended_at, ok, error_name,
            error_message, error_traceback, retry_delay_seconds, worker, logs)
        SELECT s.id, v.attempt, v.started, v.now, true, '', '', '', NULL, v.worker, v.logs
        FROM s JOIN v ON v.iid = s.instance_id AND v.name = s.name AND v.seq = s.seq
    ),{{update}}
    h AS (
        INSERT INTO {HISTORY_COLUMNS}
        SELECT v.iid, v.workflow, v.tenant, 'step.started', v.label, '', jsonb_build_object('attempt', v.attempt),
            '', '', v.started
        FROM v WHERE v.with_start
        UNION ALL
        SELECT v.iid, v.workflow, v.tenant, 'step.completed', v.label, '',
            jsonb_build_object('attempt', v.attempt, 'ms', v.ms), '', '', v.now
        FROM v{{done_history}}
    )
    SELECT s.instance_id, s.name, s.seq, v.control, s.id
    FROM s JOIN v ON v.iid = s.instance_id AND v.name = s.name AND v.seq = s.seq{{done_rows}}
"""
_DONE_PARTS = {
    "done": """
    d AS (
        SELECT e->>0 AS iid, e->>1 AS token, (e->>2)::timestamptz AS now,
            CASE WHEN jsonb_typeof(e->3) = 'null' THEN NULL ELSE e->3 END AS output
        FROM jsonb_array_elements(%(done)s::jsonb) AS e
    ),""",
    "done_ids": " UNION ALL SELECT iid FROM d",
    "update": f"""
    u AS (
        UPDATE engine_instance AS e SET status = 'complete', output = d.output, ended_at = d.now,
            updated_at = d.now, ready_at = NULL, {RELEASE}, control = '', error_name = '', error_message = ''
        FROM d JOIN g ON g.id = d.iid AND g.lease_token = d.token AND g.lease_expires_at > d.now
        WHERE e.id = d.iid
        RETURNING e.id, e.workflow, e.tenant, d.now
    ),""",
    "done_history": """
        UNION ALL
        SELECT u.id, u.workflow, u.tenant, 'instance.status', '', 'complete', '{}'::jsonb, '', '', u.now
        FROM u""",
    "done_rows": """
    UNION ALL
    SELECT u.id, NULL, NULL, NULL, NULL FROM u""",
}
# Steps only (the common batch), and steps with instances' completions.
_GROUP_STEPS = _GROUP_TEMPLATE.format(**{key: "" for key in _DONE_PARTS})
_GROUP_WRITE = _GROUP_TEMPLATE.format(**_DONE_PARTS)


def group_write(
    raw: Any, steps: Sequence[Completion], done: Sequence[InstanceDone]
) -> tuple[dict[tuple[str, str, int], tuple[str, int]], set[str]]:
    """Store steps' successful attempts and instances' completions in one statement on `raw`, a
    psycopg connection. Returns ({(instance id, name, seq): (control, step id)} of the steps
    written, {ids of the instances completed}); a write whose lease is lost is absent."""
    params = {"steps": "[" + ",".join(c.element() for c in steps) + "]"}
    if done:
        params["done"] = "[" + ",".join(d.element() for d in done) + "]"
    statement = _GROUP_WRITE if done else _GROUP_STEPS
    cursor = kept_cursor(raw, statement)
    cursor.execute(statement, params, prepare=True)
    rows = cursor.fetchall()
    written: dict[tuple[str, str, int], tuple[str, int]] = {}
    completed: set[str] = set()
    for r in map(_Written._make, rows):
        if r.name is not None and r.seq is not None and r.step_id is not None:
            written[(r.iid, r.name, r.seq)] = (str(r.control), r.step_id)
        else:
            completed.add(r.iid)
    return written, completed
