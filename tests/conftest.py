"""Shared test setup: service requirements (PostgreSQL, Redis), the engine's clock, workflows."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_URL = os.environ.get("RUNLEDGER_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("RUNLEDGER_TEST_REDIS_URL", os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0")
CHROMIUM = "/usr/bin/chromium"  # Debian's, installed by .ci/run; the browser tests drive it
# The key that encrypts secrets at rest in tests (a Fernet key made for them, never used elsewhere).
# In the environment too, so the web and worker processes the e2e tests start share it.
TEST_SECRET_KEY = "oxp6J3SoqUxkDRBOMrD0Ndq3v3b0dHd1Hk5uPEeQ7mw="
os.environ.setdefault("RUNLEDGER_SECRET_KEYS", TEST_SECRET_KEY)


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def postgres_available() -> bool:
    from urllib.parse import urlparse

    url = urlparse(PG_URL)
    return _answers(url.hostname or "127.0.0.1", url.port or 5432)


def redis_available() -> bool:
    from urllib.parse import urlparse

    url = urlparse(REDIS_URL)
    return _answers(url.hostname or "127.0.0.1", url.port or 6379)


def chromium_available() -> bool:
    return os.access(CHROMIUM, os.X_OK)


def require(service: str, available: bool) -> None:
    """Skip without the service on a laptop; under CI=true a missing service is a failure."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"{service} is required under CI=true but does not answer", pytrace=False)
    pytest.skip(f"{service} is not running here")


@pytest.fixture
def require_postgres() -> None:
    """For a test of a PostgreSQL feature: the suite's own database must be PostgreSQL (skipped
    on the embedded SQLite default, a failure under CI=true)."""
    from django.db import connection

    require("PostgreSQL as the test database (DATABASE_URL=postgres://…)", connection.vendor == "postgresql")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("postgres"):
        require(f"PostgreSQL at {PG_URL}", postgres_available())
    if item.get_closest_marker("redis"):
        require(f"Redis at {REDIS_URL}", redis_available())


@pytest.fixture(autouse=True, scope="session")
def _secret_keys() -> None:
    """Settings were read before this file: give them the tests' key unless one was configured."""
    from django.conf import settings

    if not settings.RUNLEDGER_SECRET_KEYS:
        settings.RUNLEDGER_SECRET_KEYS = [os.environ["RUNLEDGER_SECRET_KEYS"]]


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hashing() -> None:
    """PBKDF2's deliberate slowness costs seconds per persona login; tests need no such defence."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _engine_clock() -> Iterator[None]:
    """Every test starts with the real time and leaves it so."""
    from ingest.engine.clock import clock

    clock.reset()
    yield
    clock.reset()


@pytest.fixture(autouse=True, scope="session")
def _release_test_database(django_db_setup, django_db_blocker) -> Iterator[None]:
    """At the end of the session, before the test database is dropped: close the engine's own
    connections (group commit, start markers, notifications and the threads of in-process
    workers hold connections of their own, which close only when idle) so the drop succeeds."""
    yield
    from django.db import connection

    from ingest.engine.writes.commits import express, group

    group.close()
    express.close()
    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock():
        end_other_sessions_of_test_database()


def end_other_sessions_of_test_database() -> None:
    """End the other sessions of the database this suite created, so it can be dropped.

    Only ever that database: when the connection points elsewhere (no test used the test
    database, or DATABASE_URL names a shared one), other people's sessions are left alone."""
    from django.db import connection

    test_name = connection.creation._get_test_db_name()
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        if cursor.fetchone()[0] != test_name:
            return
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE datname = %s AND pid <> pg_backend_pid()", [test_name])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The fuzz suites' figures (tests/fuzzing.py): cases, 5xx answers, refused requests that
    changed rows; bench/fuzz.py quotes them."""
    from tests.fuzzing import summary_lines

    for line in summary_lines():
        terminalreporter.write_line(line)
