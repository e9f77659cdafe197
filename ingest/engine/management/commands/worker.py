"""`manage.py worker`: run a worker process until SIGTERM/SIGINT, then drain and exit 0."""

from __future__ import annotations

import fcntl
import gc
import signal
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest.engine.sql.base import is_postgres
from ingest.engine.worker.loop import Worker


class Command(BaseCommand):
    help = (
        "Start a worker that claims and runs workflow instances. SIGTERM or SIGINT drains it: "
        "nothing new is claimed, in-flight steps finish, leases are released, exit 0. On "
        "PostgreSQL run as many as you like on as many machines; on SQLite one worker process runs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--concurrency", type=int, default=8,
                            help="instances running steps at once (default 8); a slot whose turn has only "
                                 "its last write left is claimed for again meanwhile")
        parser.add_argument("--lease", type=float, default=None,
                            help="lease seconds (default RUNLEDGER_LEASE_SECONDS, 30): how long a dead worker's "
                                 "instances wait before another worker takes them over")
        parser.add_argument("--poll", type=float, default=None,
                            help="seconds between polls when idle (default RUNLEDGER_POLL_SECONDS, 1)")
        parser.add_argument("--drain-timeout", type=float, default=600.0,
                            help="seconds to wait for in-flight steps on SIGTERM (default 600)")
        parser.add_argument("--id", default=None, help="worker id shown in the ledger (default host:pid:random)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["concurrency"] < 1:
            raise CommandError(f"--concurrency must be at least 1; got {options['concurrency']}")
        lock = self._single_sqlite_worker()
        worker = Worker(concurrency=options["concurrency"], worker_id=options["id"],
                        lease_seconds=options["lease"], poll_seconds=options["poll"])
        # Everything loaded so far (Django, the apps, the registered workflows) lives as long as
        # the process: out of the collector's way, so a full collection walks only what the
        # turns create, not ~200,000 startup objects (dashboard/warm.py does the same for web).
        gc.collect()
        gc.freeze()
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        worker.start()
        self.stdout.write(f"worker {worker.worker_id} started (concurrency {worker.concurrency})")
        self.stdout.flush()
        stop.wait()
        self.stdout.write(f"worker {worker.worker_id} draining {worker.inflight} in-flight instance(s)")
        self.stdout.flush()
        clean = worker.stop(timeout=options["drain_timeout"])
        self.stdout.write(f"worker {worker.worker_id} stopped after {worker.turns} turn(s)"
                          + ("" if clean else " (drain timed out; leases will expire)"))
        if lock is not None:
            lock.close()

    def _single_sqlite_worker(self) -> Any:
        if is_postgres():
            return None
        name = Path(str(settings.DATABASES["default"]["NAME"]))
        handle = open(name.with_suffix(name.suffix + ".worker-lock"), "w")  # noqa: SIM115 - held for the process
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CommandError(
                f"another worker already runs on the SQLite database {name}; SQLite takes one worker "
                "process (use PostgreSQL via DATABASE_URL to run several)"
            ) from None
        return handle
