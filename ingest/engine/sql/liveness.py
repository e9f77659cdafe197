"""Leases tied to their worker's PostgreSQL session.

Each worker process holds a session-level advisory lock, keyed by its worker id, on a connection
of its own (worker/liveness.py). The lock dies with the session: when the process is killed the
kernel closes its socket, the backend ends, and the lock is gone at once. Leases taken while the
lock is held carry a token starting with LIVE_TOKEN; a lease of that kind whose owner holds no
lock belongs to a dead worker (or one cut off from the database) and may be ended early, well
before it expires. Leases of other owners (run_until_idle, scripts) are left to expire.

The lock is (hashtext('runledger.worker'), hashtext(worker id)): two int4 keys, as pg_locks
shows them (classid, objid, objsubid = 2). Two worker ids with the same hash share a key; the
second worker then holds no lock of its own, and its leases only look alive (they expire as
leases always did): the safe side.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

LIVE_TOKEN = "live-"

_KEY = "hashtext('runledger.worker'), hashtext(%(owner)s)"

# The owner's lock, as pg_locks shows it, in this database.
_LOCK_HELD = """EXISTS (
    SELECT 1 FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid = (hashtext('runledger.worker')::bigint & 4294967295)::oid
      AND l.objid = (hashtext(i.lease_owner)::bigint & 4294967295)::oid)"""

_ORPHANED = f"""i.lease_owner <> '' AND i.lease_token LIKE '{LIVE_TOKEN}%%' AND i.lease_expires_at >= %(now)s
    AND NOT {_LOCK_HELD}"""


def lock(raw: Any, *, owner: str) -> bool:
    """Take this worker's liveness lock on `raw` (its own autocommit psycopg connection); False
    when another session holds the same key."""
    row = raw.execute(f"SELECT pg_try_advisory_lock({_KEY})", {"owner": owner}).fetchone()
    return bool(row and row[0])


def absent_owners(raw: Any, *, now: datetime) -> list[str]:
    """Owners of live, session-tied leases whose session holds no liveness lock."""
    rows = raw.execute(
        f"SELECT DISTINCT i.lease_owner FROM engine_instance i WHERE {_ORPHANED}", {"now": now}
    ).fetchall()
    return [row[0] for row in rows]


def reap(raw: Any, *, owners: Sequence[str], now: datetime) -> tuple[list[str], list[int]]:
    """End the session-tied leases of `owners` whose lock is still absent (checked again here):
    they expire now, so the next claim takes them. Returns the instances, and the budget
    reservations their dead attempts still hold, read in the same statement: no later attempt
    can have reserved yet (it needs the lease this statement ends), so those are exactly the
    dead worker's, to give back whether or not another worker has claimed the instance since."""
    rows = raw.execute(
        f"""WITH taken AS (
                UPDATE engine_instance i SET lease_expires_at = %(now)s - interval '1 millisecond'
                WHERE i.lease_owner = ANY(%(owners)s) AND {_ORPHANED}
                RETURNING i.id)
            SELECT t.id, ARRAY(SELECT r.id FROM engine_budgetreservation r
                               WHERE r.instance_id = t.id AND r.state = 'held') FROM taken t""",
        {"now": now, "owners": list(owners)},
    ).fetchall()
    return [row[0] for row in rows], [rid for row in rows for rid in row[1]]


def renew(*, instance_id: str, owner: str, token: str, new_token: str, lease_until: datetime) -> bool:
    """Give a lease this worker still holds a new token (and extend it), for a turn retried after
    a failed write: the failed turn's writes still in flight carry the old token and are refused.
    Like the heartbeat it revives a lease that expired while nobody claimed it; False when the
    instance is no longer this worker's (released, terminated, claimed by another)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE engine_instance SET lease_token = %s, lease_expires_at = %s "
            "WHERE id = %s AND lease_owner = %s AND lease_token = %s",
            [new_token, lease_until, instance_id, owner, token],
        )
        return bool(cursor.rowcount == 1)
