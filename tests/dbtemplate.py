"""Migrated databases for the tests, built once and cloned.

Running every migration costs a process start and tens of seconds; the suite needs a migrated
database per xdist worker, per browser stack and per end-to-end test that starts real worker
processes. So the migrated schema is built once per set of migrations (a template keyed by a
hash of the migration files) and each of those databases is a clone of it:

- PostgreSQL: `CREATE DATABASE … TEMPLATE rl_tmpl_<hash>`, a file-level copy inside the server;
- SQLite: a copy of a migrated file, checkpointed out of WAL mode first so the copy is whole.

Templates are kept between runs, so a second run on the same migrations clones at once. A file
lock makes concurrent test processes (xdist workers, several checkouts) build each template once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import psycopg

ROOT = Path(__file__).resolve().parents[1]
# Everything `migrate` reads: the migration folders, the SQL they load, and the secrets module
# their data migrations seal values with.
_SCHEMA_SOURCES = ("ingest", "dashboard")
_EXTRA_SOURCES = ("ingest/engine/secrets.py",)
WORK_DIR = Path(tempfile.gettempdir()) / "runledger-test-templates"


def schema_hash() -> str:
    digest = hashlib.sha256()
    files: list[Path] = []
    for top in _SCHEMA_SOURCES:
        for path in (ROOT / top).rglob("*"):
            in_migrations = "migrations" in path.relative_to(ROOT).parts
            if path.is_file() and (path.suffix == ".sql" or (in_migrations and path.suffix == ".py")):
                files.append(path)
    files.extend(ROOT / name for name in _EXTRA_SOURCES)
    for path in sorted(files):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@contextmanager
def _locked(name: str) -> Iterator[None]:
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    with open(WORK_DIR / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _migrate(database_url: str) -> None:
    env = dict(os.environ, DATABASE_URL=database_url, PYTHONUNBUFFERED="1")
    env.pop("RUNLEDGER_WORKFLOW_MODULES", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--run-syncdb", "-v0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        raise RuntimeError(f"migrating the test template {database_url} failed:\n{result.stdout}\n{result.stderr}")


def _with_database(server_url: str, name: str) -> str:
    return urlunparse(urlparse(server_url)._replace(path=f"/{name}"))


def _admin_url(server_url: str) -> str:
    """The server's maintenance database: the URL's own may not exist yet."""
    return _with_database(server_url, "postgres")


def postgres_template(server_url: str) -> str:
    """The name of the migrated template database on `server_url`'s server, built if missing."""
    name = f"rl_tmpl_{schema_hash()}"
    with _locked(name), psycopg.connect(_admin_url(server_url), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s AND datistemplate", [name]).fetchone()
        if exists:
            return name
        building = f"{name}_building"
        conn.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{building}"')
        try:
            _migrate(_with_database(server_url, building))
        except BaseException:
            conn.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')
            raise
        # Marked as a template only once whole: a crash mid-build leaves a `_building` database
        # that the next run drops, never a half-migrated template.
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
        conn.execute(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false')
    return name


def postgres_clone(server_url: str, name: str) -> None:
    """(Re)create database `name` on `server_url`'s server as a clone of the migrated template."""
    template = postgres_template(server_url)
    with _locked(template), psycopg.connect(_admin_url(server_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')


def postgres_drop(server_url: str, name: str) -> None:
    """Drop database `name`, ending its sessions (threads of in-process workers keep some open)
    and no other database's."""
    with psycopg.connect(_admin_url(server_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def sqlite_template() -> Path:
    """A migrated SQLite file in rollback-journal mode, built if missing."""
    path = WORK_DIR / f"tmpl-{schema_hash()}.sqlite3"
    with _locked(path.stem):
        if path.exists():
            return path
        building = path.with_suffix(".building")
        for leftover in WORK_DIR.glob(f"{building.name}*"):
            leftover.unlink()
        _migrate(f"sqlite:///{building}")
        # The migration ran in WAL mode: fold the log into the file so one file is the database.
        conn = sqlite3.connect(building)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode=DELETE")
        finally:
            conn.close()
        for leftover in WORK_DIR.glob(f"{building.name}-*"):
            leftover.unlink()
        building.replace(path)
    return path


def sqlite_clone(target: Path) -> None:
    """Make `target` a migrated SQLite database (a copy of the template)."""
    sqlite_remove(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sqlite_template(), target)


def sqlite_remove(target: Path) -> None:
    """Remove a SQLite database and the files SQLite and the worker keep beside it."""
    for suffix in ("", "-wal", "-shm", "-journal", ".worker-lock"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
