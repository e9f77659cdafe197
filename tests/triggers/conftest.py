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
def _no_leader_left_behind() -> Any:
    """A test that ticks a `Scheduler()` on PostgreSQL takes the leader's session advisory lock on
    the test's connection and never resigns; the lock would outlive the test and keep the schedulers
    of the next test (on their own connections) from ever leading."""
    yield
    from django.db import connection

    if connection.vendor == "postgresql" and connection.connection is not None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock_all()")
