"""/healthz and /readyz as a load balancer sees them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.utils import timezone

from dashboard.observability import health
from ingest.engine import create
from ingest.engine.models import History, HistoryKind, Instance


def test_healthz_answers_without_touching_the_database(db: object, django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(0):
        response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_ready_with_the_database_migrations_and_an_idle_ledger(db: object) -> None:
    response = Client().get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["checks"]["database"]["ok"] and body["checks"]["migrations"]["ok"]
    assert body["checks"]["worker"]["detail"].startswith("idle")


@override_settings(RUNLEDGER_READY_WORKER_SECONDS=60)
def test_readyz_is_503_when_work_is_overdue_and_no_worker_was_seen(db: object) -> None:
    create("obs-flaky", id="stuck-1", tenant="acme")
    now = timezone.now()
    Instance.objects.filter(id="stuck-1").update(ready_at=now - timedelta(minutes=5))
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["worker"]["ok"] is False
    assert "manage.py worker" in response.json()["checks"]["worker"]["detail"]
    # A claim within the last minute shows a worker alive: ready again.
    History.objects.create(
        workflow="obs-flaky",
        tenant="acme",
        kind=HistoryKind.INSTANCE_STATUS,
        status="running",
        created_at=now - timedelta(seconds=10),
    )
    assert Client().get("/readyz").status_code == 200


@override_settings(RUNLEDGER_READY_WORKER_SECONDS=60)
def test_a_live_lease_counts_as_a_live_worker(db: object) -> None:
    create("obs-flaky", id="stuck-2", tenant="acme")
    now = timezone.now()
    Instance.objects.filter(id="stuck-2").update(ready_at=now - timedelta(minutes=5))
    create("obs-flaky", id="held-3", tenant="acme")
    Instance.objects.filter(id="held-3").update(
        lease_owner="w1", lease_token="x", lease_expires_at=now + timedelta(seconds=20)
    )
    check = health.worker_check(now=now, within=timedelta(seconds=60))
    assert check.ok and "lease" in check.detail


@pytest.fixture
def unreachable_database(transactional_db: object) -> Iterator[None]:
    """The default connection pointed at a database that cannot be opened, then restored."""
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "postgresql":
        connection.settings_dict["PORT"] = 1  # nothing listens there
    else:
        connection.settings_dict["NAME"] = "/nonexistent-dir/runledger.sqlite3"
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


def test_readyz_is_503_naming_the_database_when_it_cannot_be_reached(unreachable_database: None) -> None:
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"]["ok"] is False
    assert "Error" in body["checks"]["database"]["detail"]
    assert Client().get("/healthz").status_code == 200  # the process itself is up


def test_readyz_lists_unapplied_migrations(db: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from django.db.migrations.recorder import MigrationRecorder

    monkeypatch.setattr(health, "_migrated", False)
    MigrationRecorder.Migration.objects.filter(app="observability", name="0001_initial").delete()
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert "observability.0001_initial" in response.json()["checks"]["migrations"]["detail"]


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed when the block ends: nothing listens there


@pytest.fixture
def pooled_unreachable(
    require_postgres: None, db: object, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """The web pool as dashboard/config.py builds it (it waits 10 s for a connection), pointed
    at a closed local port, standing in for the default connection /readyz uses."""
    from django.db.utils import ConnectionHandler

    from dashboard.config import database_config

    env = {"DATABASE_URL": f"postgres://postgres@127.0.0.1:{_closed_port()}/runledger", "RUNLEDGER_DB_POOL": "4"}
    handler = ConnectionHandler(
        {"default": {"ENGINE": "django.db.backends.dummy"}, "readyz-probe": database_config(env, base_dir=tmp_path)}
    )
    conn = handler["readyz-probe"]
    assert conn.settings_dict["OPTIONS"]["pool"]["timeout"] == 10.0
    monkeypatch.setattr(health, "connection", conn)
    try:
        yield conn
    finally:
        if conn.pool is not None:
            conn.pool.close(timeout=0)
            del conn._connection_pools[conn.alias]


def test_readyz_answers_503_without_waiting_out_the_pool_when_the_database_is_down(
    pooled_unreachable: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.conf import settings

    waited: list[float | None] = []
    getconn = pooled_unreachable.pool.getconn

    def spy(timeout: float | None = None) -> Any:
        waited.append(timeout)
        return getconn(timeout=timeout)

    monkeypatch.setattr(pooled_unreachable.pool, "getconn", spy)
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"]["ok"] is False
    # The probe asks the pool for a connection with its own short timeout, not the pool's 10 s
    # (a wall-clock bound could not tell the two apart on a loaded machine).
    assert waited[:1] == [settings.RUNLEDGER_READY_DATABASE_SECONDS] and settings.RUNLEDGER_READY_DATABASE_SECONDS < 2


def test_readyz_without_the_pool_bounds_a_fresh_connect(
    require_postgres: None, db: object, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db.utils import ConnectionHandler

    from dashboard.config import database_config

    env = {"DATABASE_URL": f"postgres://postgres@127.0.0.1:{_closed_port()}/runledger"}
    conn = ConnectionHandler(
        {"default": {"ENGINE": "django.db.backends.dummy"}, "readyz-direct": database_config(env, base_dir=tmp_path)}
    )["readyz-direct"]
    seen: list[dict[str, Any]] = []
    connect = conn.Database.connect

    def spy(**params: Any) -> Any:
        seen.append(params)
        return connect(**params)

    monkeypatch.setattr(conn.Database, "connect", spy)
    check = health.database_check(conn, seconds=1.5)
    assert not check.ok and seen[0]["connect_timeout"] == 2
