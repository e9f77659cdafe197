"""The lock that serialises retiring a workflow version against the actions that run an
instance on an old version again (retry, restart from a step, fork)."""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection

from ingest.engine.sql.base import ByVendor


def version_lock(*, workflow: str, version: int) -> None:
    """Hold (workflow, version) until the transaction ends. Retire checks "no instance runs on it"
    and inserts its row; retry, restart and fork check "not retired" and set an instance running.
    Without one lock both could commit, leaving an instance running on a retired version. SQLite
    has one writer at a time already."""
    _version_lock()(workflow, version)


def _advisory_lock(workflow: str, version: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext('runledger.version'), hashtext(%s || '|' || %s::text))",
            [workflow, version],
        )


def _single_writer(workflow: str, version: int) -> None:
    pass


_version_lock = ByVendor[Callable[[str, int], None]](postgresql=_advisory_lock, sqlite=_single_writer)
