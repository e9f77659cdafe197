"""The health check a web process's PostgreSQL pool runs when it hands out a connection.

psycopg_pool's own check (what Django installs with CONN_HEALTH_CHECKS) sends an empty query
before every `getconn`: under daphne every request takes a connection from the pool, so every
request that touches the database paid one more round trip for it (on ingress, a third of the
web CPU above the no-op ceiling). A connection handed out within the last `RECENT_SECONDS`
served a request moments ago and is handed out again unchecked, as HikariCP's
`aliveBypassWindowMs` (500 ms) does; one idle for longer — after a quiet spell, a restarted
server — is checked first, and a dead one is discarded and replaced by the pool. What the window
gives up: a server that drops connections within it fails the requests that get them (503,
dashboard/unavailable.py), once per dropped connection; the pool then discards them.
"""

from __future__ import annotations

import time
from typing import Any

RECENT_SECONDS = 0.5


def check_unless_recent(conn: Any) -> None:
    """psycopg_pool's `check` callback: raise when a connection idle for over RECENT_SECONDS no
    longer answers (the pool then discards it and hands out another)."""
    from psycopg_pool import ConnectionPool

    now = time.monotonic()
    if now - getattr(conn, "_runledger_handed_at", float("-inf")) > RECENT_SECONDS:
        ConnectionPool.check_connection(conn)
    conn._runledger_handed_at = now
