"""Real processes for the browser tests and the live-latency bench: daphne on a free port and a
`manage.py worker`, both on one database (a SQLite file by default, or a PostgreSQL URL)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = "tests.e2e.workflows"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Stack:
    """migrate + demo users, then daphne and one worker; `stop()` drains both (SIGTERM)."""

    def __init__(self, database_url: str, *, logs: Path, worker_concurrency: int = 4) -> None:
        self.database_url = database_url
        self.logs = logs
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.concurrency = worker_concurrency
        self.procs: list[subprocess.Popen[bytes]] = []

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            DATABASE_URL=self.database_url,
            RUNLEDGER_WORKFLOW_MODULES=WORKFLOWS,
            PYTHONUNBUFFERED="1",
            DJANGO_SETTINGS_MODULE="dashboard.settings",
            DEBUG="0",
        )
        return env

    def manage(self, *args: str, timeout: float = 300) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            raise AssertionError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def python(self, code: str) -> str:
        """Run Django code in a fresh process on the stack's database; returns what it printed."""
        return self.manage("shell", "--no-imports", "-v", "0", "-c", code)

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{name}.log", "ab") as out:  # the child keeps its own descriptor
            proc = subprocess.Popen(args, cwd=ROOT, env=self.env(), stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def start(self) -> Stack:
        if self.database_url.startswith("sqlite:///"):
            # A clone of the migrated template (tests/dbtemplate.py) instead of a `migrate`.
            from tests import dbtemplate

            dbtemplate.sqlite_clone(Path(self.database_url.removeprefix("sqlite:///")))
        else:
            self.manage("migrate", "-v0")
        self.manage("demo_users")
        self._spawn(
            "worker",
            [
                sys.executable,
                "manage.py",
                "worker",
                "--concurrency",
                str(self.concurrency),
                "--poll",
                "0.1",
                "--lease",
                "10",
            ],
        )
        self._spawn(
            "daphne",
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "dashboard.asgi:application"],
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise AssertionError(f"a server process exited early; see {self.logs}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"daphne did not listen on {self.port} within 60 s; see {self.logs}")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs.clear()


def wait_until(check, *, timeout: float, interval: float = 0.2, what: str = "condition"):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
