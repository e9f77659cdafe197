"""Faults for the real-process tests and bench/faults.py: a database whose sessions all end at
once (what clients see when PostgreSQL restarts), one that refuses connections for a while (the
restart's down time), worker processes killed with SIGKILL, and the ledger queries that say
what each fault cost."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import psycopg

from tests.engine.procs import WORKFLOWS, Database

FAULT_WORKFLOWS = "tests.engine.e2e_fault_workflows"


class FaultDatabase(Database):
    """A throwaway database whose workers also know the fault tests' workflows."""

    def env(self, **extra: str) -> dict[str, str]:
        env = super().env(**extra)
        env["RUNLEDGER_WORKFLOW_MODULES"] = f"{WORKFLOWS},{FAULT_WORKFLOWS}"
        return env

    def worker_ids(self) -> list[str]:
        return [
            row[0] for row in self.execute("SELECT DISTINCT lease_owner FROM engine_instance WHERE lease_owner <> ''")
        ]


def alter_database(db: Database, setting: str) -> None:
    """`ALTER DATABASE <db> <setting>`, from the server's admin database (`db` may refuse it)."""
    with psycopg.connect(db.admin_url, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{db.name}" {setting}')


def terminate_sessions(db: Database) -> int:
    """End every session of `db` (never another database's), as a server restart ends them."""
    with psycopg.connect(db.admin_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (db.name,),
        ).fetchone()
    return int(row[0]) if row else 0


def allow_connections(db: Database, allowed: bool) -> None:
    alter_database(db, f"ALLOW_CONNECTIONS {'true' if allowed else 'false'}")


@contextlib.contextmanager
def database_down(db: Database) -> Iterator[None]:
    """A restart as the clients see it: every session ends and new ones are refused until the
    block is left (its end is "the database is back")."""
    allow_connections(db, False)
    try:
        terminate_sessions(db)
        yield
    finally:
        allow_connections(db, True)


def restart(db: Database, *, down_seconds: float) -> float:
    """Simulate a restart of `down_seconds`; return the instant (time.time()) it answers again."""
    with database_down(db):
        time.sleep(down_seconds)
    return time.time()


def progress_lags(db: Database, *, ids: list[str], since: float) -> list[float]:
    """For each instance of `ids` not finished by `since` (epoch): seconds from `since` to its
    first history row written after it; instances that wrote none count as infinitely late."""
    done = {
        row[0]
        for row in db.execute(
            "SELECT id FROM engine_instance WHERE id = ANY(%s) AND ended_at <= to_timestamp(%s)", (ids, since)
        )
    }
    ids = [i for i in ids if i not in done]
    if not ids:
        return []
    rows = dict(
        db.execute(
            "SELECT instance_id, extract(epoch FROM min(created_at)) - %s FROM engine_history "
            "WHERE instance_id = ANY(%s) AND created_at > to_timestamp(%s) GROUP BY instance_id",
            (since, ids, since),
        )
    )
    return sorted(float(rows[i]) if i in rows else float("inf") for i in ids)


def in_flight(db: Database, workflow: str) -> list[str]:
    """Instances a worker is running a turn of (a live lease): those a restart interrupts."""
    return [
        row[0]
        for row in db.execute(
            "SELECT id FROM engine_instance WHERE workflow = %s AND status = 'running' AND lease_owner <> '' "
            "AND lease_expires_at > now()",
            (workflow,),
        )
    ]


def unfinished(db: Database, workflow: str) -> list[str]:
    return [
        row[0]
        for row in db.execute(
            "SELECT id FROM engine_instance WHERE workflow = %s "
            "AND status NOT IN ('complete', 'errored', 'terminated')",
            (workflow,),
        )
    ]


def overlapping_runs(db: Database) -> int:
    """Runs of one step of one instance that overlapped in time in two processes. A run without
    an end (its process was killed inside it, or its own end could not be written) counts from
    its start to its start: the run that took over after a kill does not overlap it."""
    return int(
        db.execute(
            "SELECT count(*) FROM e2e_effects a JOIN e2e_effects b ON a.instance_id = b.instance_id "
            "AND a.step = b.step AND a.id < b.id AND a.pid <> b.pid "
            "AND a.started < coalesce(b.ended, b.started) AND b.started < coalesce(a.ended, a.started)"
        )[0][0]
    )


def completed_steps_rerun(db: Database) -> int:
    """Runs of a step that started after that step's completion had committed."""
    return int(
        db.execute(
            "SELECT count(*) FROM e2e_effects e JOIN engine_step s ON s.instance_id = e.instance_id "
            "AND s.name = e.step WHERE s.status = 'complete' AND e.started > extract(epoch FROM s.ended_at)"
        )[0][0]
    )


def held_reservations(db: Database) -> int:
    return int(db.execute("SELECT count(*) FROM engine_budgetreservation WHERE state = 'held'")[0][0])


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else 0.0
