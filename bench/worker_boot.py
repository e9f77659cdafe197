"""Worker boot: seconds from spawning `manage.py worker` to its "started" line. Prints figures; not a test.

    .venv/bin/python bench/worker_boot.py                       # 10 boots on SQLite and on PostgreSQL
    .venv/bin/python bench/worker_boot.py --runs 20 --db sqlite
    .venv/bin/python bench/worker_boot.py --root . --root /path/to/other/checkout   # before/after
    .venv/bin/python bench/worker_boot.py --bytecode    # as after `compileall` (PYTHONDONTWRITEBYTECODE set)

A worker restarted during an incident or a deploy claims nothing until it has started, so its
boot is time the instances wait. Each boot is a fresh `python manage.py worker` (this venv's
Python, run from each `--root` checkout with that checkout first on the path), stopped with
SIGTERM as soon as it says it started. With several roots the boots alternate between them, so
every root's figures come from the same minutes of a shared machine. SQLite boots use a migrated
file per root; PostgreSQL boots a throwaway database on the server of RUNLEDGER_TEST_POSTGRES_URL
(or BENCH_PG_SERVER), dropped at the end. The workflows are the product's own (no test modules).
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parents[1]
SERVER = os.environ.get("BENCH_PG_SERVER") or os.environ.get(
    "RUNLEDGER_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)
MARK = b"started (concurrency"


PYCACHE: str | None = None  # --bytecode: a bytecode cache outside the checkouts


def env_for(root: Path, database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RUNLEDGER_WORKFLOW_MODULES", "DJANGO_SETTINGS_MODULE")}
    env.update(DATABASE_URL=database_url, PYTHONPATH=str(root), PYTHONUNBUFFERED="1")
    if PYCACHE is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = f"{PYCACHE}/{root.name}"
    return env


def migrate(root: Path, database_url: str) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        cwd=root,
        env=env_for(root, database_url),
        check=True,
        capture_output=True,
    )


def boot(root: Path, database_url: str, *, timeout: float = 120.0) -> float:
    """Seconds from spawn to the start line; the worker is stopped (SIGTERM) and reaped."""
    with tempfile.TemporaryFile() as out:
        began = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "worker", "--concurrency", "8"],
            cwd=root,
            env=env_for(root, database_url),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            while True:
                out.seek(0)
                if MARK in out.read():
                    took = time.perf_counter() - began
                    break
                if proc.poll() is not None or time.perf_counter() - began > timeout:
                    out.seek(0)
                    raise SystemExit(f"worker in {root} did not start:\n{out.read().decode(errors='replace')}")
                time.sleep(0.005)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:  # a worker that missed its SIGTERM (the base may)
                proc.kill()
                proc.wait()
    return took


class PgDatabase:
    def __init__(self) -> None:
        self.name = f"runledger_boot_{secrets.token_hex(4)}"
        self.url = urlunparse(urlparse(SERVER)._replace(path=f"/{self.name}"))

    def __enter__(self) -> PgDatabase:
        import psycopg

        with psycopg.connect(SERVER, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        return self

    def __exit__(self, *exc: object) -> None:
        import psycopg

        with psycopg.connect(SERVER, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="boots per root and database (default 10)")
    parser.add_argument(
        "--root",
        action="append",
        type=Path,
        help="a checkout to boot (repeatable; default this one)",
    )
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument(
        "--bytecode",
        action="store_true",
        help="cache compiled bytecode (in a temporary directory, not the checkouts) even where "
        "PYTHONDONTWRITEBYTECODE is set: the figure of a deploy that ran compileall",
    )
    args = parser.parse_args()
    global PYCACHE
    bytecode = tempfile.TemporaryDirectory(prefix="runledger-boot-pycache-") if args.bytecode else None
    PYCACHE = bytecode.name if bytecode is not None else None
    roots = [r.resolve() for r in (args.root or [ROOT])]
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; "
        f"python {sys.version.split()[0]}"
    )
    times: dict[tuple[str, Path], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="runledger-boot-") as tmp:
        kinds = ["sqlite", "postgres"] if args.db == "both" else [args.db]
        for kind in kinds:
            pg = PgDatabase() if kind == "postgres" else None
            if pg is not None:
                pg.__enter__()
            try:
                urls = {
                    root: pg.url if pg is not None else f"sqlite:///{tmp}/boot-{n}.sqlite3"
                    for n, root in enumerate(roots)
                }
                for root in roots if pg is None else roots[:1]:  # one schema serves every root on PostgreSQL
                    migrate(root, urls[root])
                for root in roots:
                    boot(root, urls[root])  # warm the file cache and .pyc files; not counted
                for _ in range(args.runs):
                    for root in roots:
                        times.setdefault((kind, root), []).append(boot(root, urls[root]))
            finally:
                if pg is not None:
                    pg.__exit__(None, None, None)
    print(
        f"load average {os.getloadavg()[0]:.2f} at the end; bytecode "
        + (
            "cached"
            if bytecode is not None
            else "as the environment says (PYTHONDONTWRITEBYTECODE="
            + os.environ.get("PYTHONDONTWRITEBYTECODE", "")
            + ")"
        )
    )
    print(f"{'database':<9} {'median s':>8} {'p90 s':>7} {'min s':>7} {'runs':>5}  checkout")
    for (kind, root), values in times.items():
        print(
            f"{kind:<9} {statistics.median(values):8.2f} {percentile(values, 0.9):7.2f} {min(values):7.2f} "
            f"{len(values):5d}  {root}"
        )


if __name__ == "__main__":
    main()
