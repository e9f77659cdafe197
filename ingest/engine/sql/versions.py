"""The lock that serialises retiring a workflow version against the actions that run an
instance on an old version again (retry, restart from a step, fork)."""

from __future__ import annotations

from django.db import connection

from ingest.engine.sql.base import is_postgres


def version_lock(*, workflow: str, version: int) -> None:
    """Hold (workflow, version) until the transaction ends. Retire checks "no instance runs on it"
    and inserts its row; retry, restart and fork check "not retired" and set an instance running.
    Without one lock both could commit, leaving an instance running on a retired version. SQLite
    has one writer at a time already."""
    if not is_postgres():
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext('runledger.version'), hashtext(%s || '|' || %s::text))",
                       [workflow, version])
