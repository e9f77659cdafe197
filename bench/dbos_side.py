"""DBOS Transact half of the engine benchmark (see ``bench/engine.py``).

Measures DBOS Transact (the ``dbos`` package, optional extra ``bench``) on
PostgreSQL at its best, so the Runledger figures have a fair reference. It is
a measuring script, not a test: each run prints one JSON object on the last
line of stdout, so ``bench/engine.py`` can run it as a subprocess and
interleave runs with its own.

Every run creates its own system database (``--database``, default
``runledger_bench_dbos``) on ``--pg-url`` (default trust auth as ``postgres`` at
127.0.0.1:5432), and drops it at the end. PostgreSQL keeps its default
durability: nothing here touches ``synchronous_commit`` or ``fsync``. Nothing
phones home: no Conductor key, OTLP off, and ``DBOS__*`` cloud variables are
stripped from the environment.

Modes
-----
``sequential``
    One process launches DBOS and calls a workflow of ``--steps`` (10) no-op
    ``@DBOS.step()`` steps directly, one workflow at a time, ``--workflows``
    times after ``--warmup`` unmeasured ones. Headline figures (``step_p50_ms``,
    ``step_p99_ms``) are per-step timings taken inside the workflow around each
    step call: every sample is one step's full engine cost (look up the
    recorded output, run the no-op, insert the checkpoint and commit), and the
    p99 is a true per-step tail instead of one smoothed over ten steps. The
    workflow wall time divided by the step count is reported too
    (``wf_per_step_*``): it also carries the workflow's own start and finish
    writes, amortised over its steps.

``queue``
    A driver creates and migrates the database, registers a queue with
    ``worker_concurrency=--concurrency`` (10) and ``polling_interval_sec=0.05``,
    and starts ``--processes`` (2) consumer processes, each launching DBOS with
    its own ``executor_id`` (so each recovers only its own workflows, and
    there are none here). Once every consumer's queue worker thread runs, the
    driver enqueues ``--workflows`` (2,000) workflows of ``--steps`` (10) no-op
    steps through a ``DBOSClient``, ``--enqueue-batch`` per transaction, and
    waits for all of them to succeed. ``steps_per_s`` is workflows x steps
    divided by the wall time from just before the first enqueue to the last
    workflow's ``completed_at`` in the system database. ``per_process`` gives,
    per consumer, the workflows its executor id claimed in the database and
    the workflows and steps it counted itself.

Usage::

    python bench/dbos_side.py sequential --workflows 200
    python bench/dbos_side.py queue --workflows 2000 --steps 10 --processes 2 --concurrency 10
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
import sqlalchemy as sa
from dbos import DBOS, DBOSClient, DBOSConfig

APP_NAME = "runledger_bench"
APP_VERSION = "runledger-bench-1"
QUEUE_NAME = "bench_queue"
WORKFLOW_NAME = "bench_workflow"
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432"
DEFAULT_DATABASE = "runledger_bench_dbos"
READY = "READY"

# Filled by the workflow; read by the process that runs it.
_step_seconds: list[float] = []
_counts = {"workflows": 0, "steps": 0}
_counts_lock = threading.Lock()


@DBOS.step(name="noop")
def noop_step() -> None:
    """A step that does nothing: its cost is the engine's alone."""


@DBOS.workflow(name=WORKFLOW_NAME)
def bench_workflow(steps: int) -> int:
    """Run ``steps`` no-op steps in order, timing each call."""
    for _ in range(steps):
        start = time.perf_counter()
        noop_step()
        _step_seconds.append(time.perf_counter() - start)
    with _counts_lock:
        _counts["workflows"] += 1
        _counts["steps"] += steps
    return steps


# --- database set-up -------------------------------------------------------


def system_database_url(pg_url: str, database: str) -> str:
    return f"{pg_url.rstrip('/')}/{database}"


def _admin_execute(pg_url: str, sql: str) -> None:
    with psycopg.connect(f"{pg_url.rstrip('/')}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def create_database(pg_url: str, database: str) -> None:
    drop_database(pg_url, database)
    _admin_execute(pg_url, f'CREATE DATABASE "{database}"')


def drop_database(pg_url: str, database: str) -> None:
    _admin_execute(pg_url, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@contextmanager
def fresh_database(pg_url: str, database: str, keep: bool) -> Iterator[str]:
    """Create an empty database, migrate DBOS's schema into it, drop it after."""
    create_database(pg_url, database)
    url = system_database_url(pg_url, database)
    try:
        DBOS.migrate(url)
        yield url
    finally:
        if not keep:
            drop_database(pg_url, database)


def dbos_config(url: str, executor_id: str) -> DBOSConfig:
    return {
        "name": APP_NAME,
        "system_database_url": url,
        "application_version": APP_VERSION,
        "executor_id": executor_id,
        "enable_otlp": False,
        "log_level": "WARNING",
        "run_migrations": False,  # the driver migrated; launch only verifies
    }


def launch(url: str, executor_id: str) -> None:
    DBOS(config=dbos_config(url, executor_id))
    DBOS.launch()


# --- statistics ------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, ``q`` in [0, 100]."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary_ms(seconds: Sequence[float], prefix: str) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {
        f"{prefix}_p50_ms": round(percentile(ms, 50), 4),
        f"{prefix}_p99_ms": round(percentile(ms, 99), 4),
        f"{prefix}_mean_ms": round(sum(ms) / len(ms), 4),
    }


# --- sequential mode -------------------------------------------------------


def time_workflows(count: int, steps: int) -> list[float]:
    """Call the workflow ``count`` times in a row; return each call's seconds."""
    walls = []
    for _ in range(count):
        start = time.perf_counter()
        bench_workflow(steps)
        walls.append(time.perf_counter() - start)
    return walls


def run_sequential(args: argparse.Namespace) -> dict[str, Any]:
    with fresh_database(args.pg_url, args.database, args.keep_database) as url:
        launch(url, "bench-sequential")
        try:
            time_workflows(args.warmup, args.steps)
            _step_seconds.clear()
            walls = time_workflows(args.workflows, args.steps)
            step_seconds = list(_step_seconds)
        finally:
            DBOS.destroy()
    per_step = [w / args.steps for w in walls]
    return {
        "mode": "sequential",
        "engine": "dbos",
        "dbos_version": dbos_version(),
        "loadavg_1m_before": args.loadavg,
        "workflows": args.workflows,
        "steps": args.steps,
        "warmup": args.warmup,
        "timing": "per-step, around each step call inside the workflow",
        **summary_ms(step_seconds, "step"),
        **summary_ms(per_step, "wf_per_step"),
        "wf_p50_ms": round(percentile([w * 1000 for w in walls], 50), 4),
        "total_s": round(sum(walls), 3),
    }


# --- queue mode: consumer --------------------------------------------------


def queue_worker_running() -> bool:
    name = f"queue-worker-{QUEUE_NAME}"
    return any(t.name == name and t.is_alive() for t in threading.enumerate())


def run_consumer(args: argparse.Namespace) -> dict[str, Any]:
    """Consume the queue until the driver closes stdin, then report counts."""
    executor_id = f"bench-consumer-{args.index}"
    launch(args.url, executor_id)
    try:
        deadline = time.monotonic() + 30
        while not queue_worker_running():
            if time.monotonic() > deadline:
                raise RuntimeError("DBOS never started a worker thread for the queue")
            time.sleep(0.02)
        print(READY, flush=True)
        sys.stdin.read()  # the driver closes stdin when it is done
    finally:
        DBOS.destroy()
    return {"executor_id": executor_id, "pid": os.getpid(), **_counts}


# --- queue mode: driver ----------------------------------------------------


@dataclass
class Consumer:
    index: int
    proc: subprocess.Popen[str]
    report: dict[str, Any] = field(default_factory=dict)


def clean_env() -> dict[str, str]:
    """This environment without DBOS cloud/conductor variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith("DBOS__")}


def spawn_consumer(index: int, url: str) -> Consumer:
    command = [sys.executable, os.path.abspath(__file__), "consume"]
    proc = subprocess.Popen(
        [*command, "--url", url, "--index", str(index)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    return Consumer(index, proc)


def wait_ready(consumer: Consumer, timeout: float) -> None:
    """Wait until the consumer prints READY (its queue worker thread runs)."""
    stdout = consumer.proc.stdout
    assert stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not lines or lines[0].strip() != READY:
        raise RuntimeError(f"consumer {consumer.index} did not start: {lines!r}")


def stop_consumers(consumers: list[Consumer], timeout: float) -> None:
    """Close each consumer's stdin (its signal to stop) and collect its report."""
    for consumer in consumers:
        if consumer.proc.stdin is not None:
            consumer.proc.stdin.close()
    for consumer in consumers:
        try:
            consumer.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            consumer.proc.kill()
            consumer.proc.wait()
        assert consumer.proc.stdout is not None
        lines = [line for line in consumer.proc.stdout.read().splitlines() if line.strip()]
        if consumer.proc.returncode == 0 and lines:
            consumer.report = json.loads(lines[-1])


def enqueue_all(url: str, workflows: int, steps: int, batch: int) -> float:
    """Enqueue through DBOSClient, ``batch`` per transaction; return start time."""
    client = DBOSClient(system_database_url=url, application_name=APP_NAME)
    engine = sa.create_engine(sa.make_url(url).set(drivername="postgresql+psycopg"))
    options = {"queue_name": QUEUE_NAME, "workflow_name": WORKFLOW_NAME, "app_version": APP_VERSION}
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
            conn.rollback()
            start = time.time()
            for first in range(0, workflows, batch):
                if batch == 1:
                    client.enqueue(options, steps)  # type: ignore[arg-type]
                    continue
                with conn.begin():
                    for _ in range(min(batch, workflows - first)):
                        client.enqueue_in_transaction(conn, options, steps)  # type: ignore[arg-type]
        return start
    finally:
        engine.dispose()
        client.destroy()


def wait_done(url: str, workflows: int, timeout: float) -> dict[str, Any]:
    """Poll until every bench workflow succeeded; return the database's view."""
    engine = sa.create_engine(sa.make_url(url).set(drivername="postgresql+psycopg"))
    query = sa.text(
        "SELECT count(*) FILTER (WHERE status = 'SUCCESS'), count(*),"
        " max(completed_at), max(updated_at)"
        " FROM dbos.workflow_status WHERE queue_name = :queue"
    )
    deadline = time.monotonic() + timeout
    try:
        with engine.connect() as conn:
            while True:
                done, total, completed_at, updated_at = conn.execute(query, {"queue": QUEUE_NAME}).one()
                conn.rollback()
                if done >= workflows:
                    return {"end": (completed_at or updated_at) / 1000, **db_counts(conn)}
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{done}/{workflows} workflows done after {timeout}s")
                time.sleep(0.02)
    finally:
        engine.dispose()


def db_counts(conn: sa.Connection) -> dict[str, Any]:
    by_executor = conn.execute(
        sa.text(
            "SELECT executor_id, count(*) FROM dbos.workflow_status"
            " WHERE queue_name = :queue GROUP BY executor_id ORDER BY executor_id"
        ),
        {"queue": QUEUE_NAME},
    ).all()
    steps = conn.execute(
        sa.text(
            "SELECT count(*) FROM dbos.operation_outputs o JOIN dbos.workflow_status w"
            " USING (workflow_uuid) WHERE w.queue_name = :queue"
        ),
        {"queue": QUEUE_NAME},
    ).scalar_one()
    conn.rollback()
    return {"by_executor": {str(e): int(n) for e, n in by_executor}, "db_steps": int(steps)}


def run_queue(args: argparse.Namespace) -> dict[str, Any]:
    with fresh_database(args.pg_url, args.database, args.keep_database) as url:
        client = DBOSClient(system_database_url=url, application_name=APP_NAME)
        client.register_queue(
            QUEUE_NAME,
            worker_concurrency=args.concurrency,
            polling_interval_sec=args.polling_interval,
            application_name=APP_NAME,
        )
        client.destroy()
        consumers = [spawn_consumer(index, url) for index in range(args.processes)]
        try:
            for consumer in consumers:
                wait_ready(consumer, args.timeout)
            start = enqueue_all(url, args.workflows, args.steps, args.enqueue_batch)
            enqueued = time.time()
            done = wait_done(url, args.workflows, args.timeout)
        finally:
            stop_consumers(consumers, 60)
    return queue_result(args, start, enqueued, done, consumers)


def queue_result(
    args: argparse.Namespace,
    start: float,
    enqueued: float,
    done: dict[str, Any],
    consumers: list[Consumer],
) -> dict[str, Any]:
    wall = done["end"] - start
    per_process = {}
    for consumer in consumers:
        executor_id = consumer.report.get("executor_id", f"bench-consumer-{consumer.index}")
        per_process[executor_id] = {
            "db_workflows": done["by_executor"].get(executor_id, 0),
            "workflows": consumer.report.get("workflows"),
            "steps": consumer.report.get("steps"),
        }
    return {
        "mode": "queue",
        "engine": "dbos",
        "dbos_version": dbos_version(),
        "loadavg_1m_before": args.loadavg,
        "workflows": args.workflows,
        "steps": args.steps,
        "processes": args.processes,
        "concurrency": args.concurrency,
        "polling_interval_s": args.polling_interval,
        "enqueue_batch": args.enqueue_batch,
        "steps_per_s": round(args.workflows * args.steps / wall, 1),
        "wall_s": round(wall, 3),
        "enqueue_s": round(enqueued - start, 3),
        "db_steps": done["db_steps"],
        "per_process": per_process,
        "all_consumed": all(p["db_workflows"] > 0 for p in per_process.values()),
    }


# --- CLI -------------------------------------------------------------------


def dbos_version() -> str:
    from importlib.metadata import version

    return version("dbos")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    seq = sub.add_parser("sequential", help="one workflow at a time, per-step latency")
    queue = sub.add_parser("queue", help="queue throughput with worker processes")
    for p in (seq, queue):
        p.add_argument("--steps", type=int, default=10)
        p.add_argument("--pg-url", default=DEFAULT_PG_URL)
        p.add_argument("--database", default=DEFAULT_DATABASE)
        p.add_argument("--keep-database", action="store_true", help="do not drop it at the end")
    seq.add_argument("--workflows", type=int, default=200)
    seq.add_argument("--warmup", type=int, default=20)
    queue.add_argument("--workflows", type=int, default=2000)
    queue.add_argument("--processes", type=int, default=2)
    queue.add_argument("--concurrency", type=int, default=10, help="worker_concurrency")
    queue.add_argument("--polling-interval", type=float, default=0.05)
    queue.add_argument("--enqueue-batch", type=int, default=1, help="enqueues per transaction")
    queue.add_argument("--timeout", type=float, default=600, help="seconds before giving up")
    consume = sub.add_parser("consume", help=argparse.SUPPRESS)
    consume.add_argument("--url", required=True)
    consume.add_argument("--index", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.loadavg = round(os.getloadavg()[0], 2)  # the machine is shared: record its load
    logging.getLogger("dbos").setLevel(logging.WARNING)
    runners = {"sequential": run_sequential, "queue": run_queue, "consume": run_consumer}
    result = runners[args.mode](args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
