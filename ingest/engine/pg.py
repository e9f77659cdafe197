"""PostgreSQL connection details for the engine's own connections, and how a process learns
that its connections died together (a restarted server)."""

from __future__ import annotations

import threading

from django.db import connection


def connection_string() -> str:
    params = connection.get_connection_params()
    parts = []
    for key in ("host", "port", "dbname", "user", "password"):
        value = params.get(key) or (params.get("database") if key == "dbname" else None)
        if value:
            parts.append(f"{key}={value}")
    return " ".join(parts)


# ---- connections found dead ---------------------------------------------------------------
#
# A restarted server (or an administrator's terminate) ends every session at once, but a client
# learns it only when it next uses its connection, and that use fails: a turn's first write, a
# claim. The worker's own session (worker/liveness.py) is always waiting on its socket and learns
# it at once; it counts the loss here, and every other connection of the process opened before
# that count is replaced before its next use instead of failing on it.

_epoch = 0
_seen = threading.local()


def connections_lost() -> None:
    """This process's connections to the server are presumed dead (its session was ended)."""
    global _epoch
    _epoch += 1


def connections_epoch() -> int:
    """How many losses this process has counted: a connection opened at an earlier count is
    presumed dead."""
    return _epoch


def replace_stale_connection() -> None:
    """Close this thread's Django connection if a loss was counted since this thread last looked,
    so that its next query opens a new session instead of failing on a dead one."""
    if getattr(_seen, "epoch", 0) == _epoch:
        return
    _seen.epoch = _epoch
    if connection.connection is not None and not connection.in_atomic_block:
        connection.close()
