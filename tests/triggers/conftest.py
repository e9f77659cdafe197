from __future__ import annotations

from typing import Any

import pytest

from ingest.triggers.services import ingress_secret_create, route_upsert
from tests.triggers import support  # noqa: F401  (registers the test workflows)


@pytest.fixture
def acme_creds(db: Any) -> dict[str, str]:
    _, token, secret = ingress_secret_create(tenant="acme")
    return {"token": token, "secret": secret}


@pytest.fixture
def route(db: Any) -> Any:
    return route_upsert(name="orders", workflow="test-echo", tenant="acme")


@pytest.fixture(autouse=True)
def _no_leader_left_behind(request: pytest.FixtureRequest) -> Any:
    """A test that ticks a `Scheduler()` on PostgreSQL takes the leader's session advisory lock on
    the test's connection and never resigns; the lock would outlive the test and keep the schedulers
    of the next test (on their own connections) from ever leading. Only a test that had the
    database can have taken it (a pure test running after a database test in the same process
    finds that test's connection still open, and may not touch it)."""
    yield
    from django.db import connection

    had_database = request.node.get_closest_marker("django_db") is not None or any(
        name in request.fixturenames for name in ("db", "transactional_db")
    )
    if had_database and connection.vendor == "postgresql" and connection.connection is not None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock_all()")
