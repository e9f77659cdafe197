"""Real processes for the end-to-end tests: a throwaway PostgreSQL database and worker processes."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

import psycopg

from tests import dbtemplate

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = "tests.engine.e2e_workflows"


class Database:
    """A fresh database on the test PostgreSQL server, migrated, dropped at the end."""

    def __init__(self, server_url: str) -> None:
        self.name = f"runledger_e2e_{secrets.token_hex(4)}"
        parsed = urlparse(server_url)
        self.admin_url = server_url
        self.url = urlunparse(parsed._replace(path=f"/{self.name}"))

    def __enter__(self) -> Database:
        # A clone of the migrated template (tests/dbtemplate.py): `migrate` would cost a process
        # and tens of seconds per test.
        dbtemplate.postgres_clone(self.admin_url, self.name)
        from tests.engine.e2e_workflows import CREATE_EFFECTS

        self.execute(CREATE_EFFECTS)
        return self

    def __exit__(self, *exc: object) -> None:
        dbtemplate.postgres_drop(self.admin_url, self.name)

    def execute(self, sql: str, params: tuple | list | None = None) -> list[tuple]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(DATABASE_URL=self.url, RUNLEDGER_WORKFLOW_MODULES=WORKFLOWS, PYTHONUNBUFFERED="1", **extra)
        return env


def manage(db: Database, *args: str, timeout: float = 300, **extra: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=db.env(**extra),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise AssertionError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def python(db: Database, code: str, timeout: float = 300) -> str:
    """Run Django code in a fresh process against the test database (creating instances, say)."""
    return manage(db, "shell", "-c", code, timeout=timeout)


def start_worker(
    db: Database,
    *,
    concurrency: int = 8,
    lease: float = 3.0,
    poll: float = 0.2,
    log: Path | None = None,
    wait: bool = True,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    """Start `manage.py worker` (`args`: more of its options); with `wait`, return once it says
    it started (its signal handlers are set: a SIGTERM during Django's start-up kills it
    instead of draining). The start line is found as text or as a JSON log record's event."""
    if log is None:
        import tempfile

        log = Path(tempfile.mkstemp(prefix="runledger-worker-", suffix=".log")[1])
    with open(log, "ab") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "worker",
                "--concurrency",
                str(concurrency),
                "--lease",
                str(lease),
                "--poll",
                str(poll),
                *args,
            ],
            cwd=ROOT,
            env=db.env(**(env or {})),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    proc.log_path = log  # type: ignore[attr-defined]
    if wait:
        wait_ready(proc)
    return proc


def start_workers(db: Database, count: int, *, log_dir: Path, **options: Any) -> list[subprocess.Popen[bytes]]:
    """Start `count` workers at once and return when all have started, so all share the work."""
    procs = [start_worker(db, log=log_dir / f"w{i}.log", wait=False, **options) for i in range(count)]
    return wait_ready(*procs)


def wait_ready(*procs: subprocess.Popen[bytes], timeout: float = 60.0) -> list[subprocess.Popen[bytes]]:
    deadline = time.monotonic() + timeout
    for proc in procs:
        log: Path = proc.log_path  # type: ignore[attr-defined]
        while b"started (concurrency" not in log.read_bytes():
            if proc.poll() is not None:
                raise AssertionError(f"worker exited with {proc.returncode} before starting:\n{log.read_text()}")
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"worker did not start within {timeout:g} s:\n{log.read_text()}")
            time.sleep(0.05)
    return list(procs)


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 60) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    return proc.wait(timeout=timeout)


def wait_for(check: Callable[[], bool], *, timeout: float, interval: float = 0.1, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
