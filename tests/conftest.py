"""Shared test setup: service requirements (PostgreSQL, Redis), the engine's clock, workflows."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
def _channel_layer_of_this_process() -> None:
    """Parallel test processes share one Redis: each gets a key prefix of its own (in this process
    and in the servers it starts), so one's groups and flushes never reach another's."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    from channels.layers import channel_layers
    from django.conf import settings

    prefix = f"asgi-test-{worker}"
    os.environ["RUNLEDGER_CHANNEL_PREFIX"] = prefix
    layer = settings.CHANNEL_LAYERS.get("default", {})
    if "RedisChannelLayer" in layer.get("BACKEND", ""):
        layer["CONFIG"]["prefix"] = prefix
        channel_layers.backends.clear()


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hashing() -> None:
    """PBKDF2's deliberate slowness costs seconds per persona login; tests need no such defence."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _engine_clock() -> Iterator[None]:
    """Every test starts with the real time and leaves it so, and with no secret values
    remembered by the redaction (tests share a process, in an order xdist chooses)."""
    from ingest.engine import redaction
    from ingest.engine.clock import clock

    clock.reset()
    redaction.forget_all()
    yield
    clock.reset()


@pytest.fixture(autouse=True)
def _items_asked_afresh() -> None:
    """The instances list remembers for two seconds that no fan-out item exists (so it does not
    ask on every page); each test writes its own ledger, so it starts with nothing remembered."""
    from dashboard.selectors import instance_matches

    instance_matches._none_until = 0.0


def _server_url() -> str:
    return os.environ.get("DATABASE_URL") or PG_URL


@pytest.fixture(scope="session")
def django_db_setup(
    request: pytest.FixtureRequest,
    django_test_environment: None,
    django_db_blocker: Any,
    django_db_modify_db_settings: None,
) -> Iterator[None]:
    """pytest-django's test database, cloned from a migrated template (tests/dbtemplate.py)
    instead of migrated anew by every xdist worker; dropped at the end with its sessions."""
    from django.conf import settings
    from django.test.utils import setup_databases, teardown_databases

    from tests import dbtemplate

    db = settings.DATABASES["default"]
    vendor = "postgresql" if "postgres" in db["ENGINE"] else "sqlite"
    if vendor == "sqlite":
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        test_name = str(dbtemplate.WORK_DIR / f"test-{os.getpid()}-{worker}.sqlite3")
        db["TEST"] = {**db.get("TEST", {}), "NAME": test_name}
        dbtemplate.sqlite_clone(Path(test_name))
    else:
        test_name = db.get("TEST", {}).get("NAME") or f"test_{db['NAME']}"
        db["TEST"] = {**db.get("TEST", {}), "NAME": test_name}
        dbtemplate.postgres_clone(_server_url(), test_name)
    with django_db_blocker.unblock():
        # keepdb: the clone is there and migrated; Django checks the plan and runs post_migrate.
        old_config = setup_databases(
            verbosity=request.config.option.verbose,
            interactive=False,
            keepdb=True,
            aliases={"default"},
            serialized_aliases=set(),
        )
    yield
    from django.db import connections

    from ingest.engine.writes.commits import express, group

    # The engine's own connections (group commit, start markers, notifications, in-process
    # workers' threads) close only when idle: close what this thread can, drop with FORCE.
    group.close()
    express.close()
    with django_db_blocker.unblock():
        teardown_databases(old_config, verbosity=0, keepdb=True)
        connections.close_all()
    if vendor == "sqlite":
        dbtemplate.sqlite_remove(Path(test_name))
    else:
        dbtemplate.postgres_drop(_server_url(), test_name)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject's addopts): two test processes per core, or RUNLEDGER_TEST_PROCESSES.

    Many tests spend their time waiting on real processes, sockets and a browser rather than
    computing, so one process per core leaves the cores idle."""
    raw = os.environ.get("RUNLEDGER_TEST_PROCESSES", "").strip()
    if raw:
        return max(1, int(raw))
    return max(2, 2 * (os.cpu_count() or 1))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands its fuzz figures to the controller, which prints the summary."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        from tests.fuzzing import tally

        workeroutput["fuzz_tally"] = dict(tally)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    from tests.fuzzing import tally

    tally.update(getattr(node, "workeroutput", {}).get("fuzz_tally", {}))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The fuzz suites' figures (tests/fuzzing.py): cases, 5xx answers, refused requests that
    changed rows; bench/fuzz.py quotes them."""
    from tests.fuzzing import summary_lines

    for line in summary_lines():
        terminalreporter.write_line(line)
