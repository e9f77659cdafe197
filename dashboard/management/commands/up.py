"""`manage.py up`: the whole app in one process — migrations, demo data, web, worker, scheduler,
and the dashboard's rollups."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

log = logging.getLogger("runledger")


class Command(BaseCommand):
    help = (
        "Start Runledger in one process: apply migrations, create the demo users and (unless "
        "--no-demo) ingest the demo data set, onboard a few RankDisco domains against offline "
        "DataForSEO answers and create a demo schedule, route, ingress credential (its token and "
        "secret printed once) and event subscription, then serve the dashboard and API with daphne while an "
        "in-process worker runs instances, the scheduler fires cron schedules, the rollups "
        "behind the DAG and costs pages catch up, alert rules are evaluated and finished "
        "instances past their retention are archived. The embedded default (SQLite, with a local "
        "secrets key file it creates); for production run daphne, `manage.py worker`, `manage.py "
        "scheduler`, `manage.py rollup`, `manage.py alerts` and `manage.py retention` as separate "
        "processes on PostgreSQL."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
        parser.add_argument("--concurrency", type=int, default=4, help="instances in flight in the worker (default 4)")
        parser.add_argument("--no-demo", action="store_true", help="do not ingest the demo data set")

    def handle(self, *args: Any, **options: Any) -> None:
        if not 0 < options["port"] < 65536:
            raise CommandError(f"--port must be between 1 and 65535; got {options['port']}")
        from dashboard.serving import PortInUse, listen_socket

        try:  # before anything starts: a taken port must not leave a worker behind
            listener = listen_socket(options["host"], options["port"])
        except PortInUse as exc:
            raise CommandError(str(exc)) from exc
        self._secret_key()
        call_command("migrate", interactive=False, verbosity=0)
        from dashboard.access import demo_users_ensure

        demo_users_ensure()
        if not options["no_demo"]:
            from ingest.demo.seed import demo_seed

            summary = demo_seed()
            self.stdout.write(f"demo data: {summary.started} ingests started, {summary.already} already there")
            from ingest.demo.rankdisco import demo_onboard

            onboarded, known = demo_onboard()
            self.stdout.write(f"demo domains: {onboarded} onboardings started, {known} already there")
            self._demo_triggers()
        from dashboard.rollups.runner import RollupRunner
        from ingest.alerts.runner import AlertRunner
        from ingest.engine import RetentionRunner, Worker
        from ingest.triggers.scheduler import Scheduler

        worker = Worker(concurrency=options["concurrency"]).start()
        scheduler = Scheduler()
        scheduler.start()
        rollups = RollupRunner()  # the DAG and costs pages' hourly rollups (dashboard/rollups)
        rollups.start()
        retention = RetentionRunner()  # finished instances past their retention_days, hourly
        retention.start()
        alerts = AlertRunner()  # alert rules, notifications and callbacks (ingest/alerts)
        alerts.start()
        url = f"http://{options['host']}:{options['port']}/"
        self.stdout.write(
            f"Runledger is up at {url} — log in as operator/operator (viewer/viewer reads only); "
            f"API tokens for the runledger CLI: {url}tokens/"
        )
        self.stdout.flush()
        try:
            self._serve(listener)
        except PortInUse as exc:
            raise CommandError(str(exc)) from exc
        finally:
            self.stdout.write("stopping: draining the worker")
            retention.stop()
            alerts.stop()
            rollups.stop()
            scheduler.stop()
            worker.stop(timeout=30)

    def _demo_triggers(self) -> None:
        from django.utils import timezone

        from ingest.demo.triggers import demo_triggers

        made = demo_triggers(now=timezone.now())
        self.stdout.write(
            f"demo triggers: {', '.join(made.created) or 'none'} created; "
            f"{', '.join(made.already) or 'none'} already there"
        )
        minted = made.credential
        if minted is not None:
            # Printed here only (never logged): the database keeps the token's hash and the
            # secret encrypted, so this is the one time anyone can read them.
            self.stdout.write(
                f"demo ingress credential {minted.tenant}/{minted.name}, shown this once (store it; "
                f"rotate it on /routes/ for a new pair):\n"
                f"  token:       {minted.token}\n"
                f"  HMAC secret: {minted.hmac_secret}\n"
                "  POST /api/routes/demo-classify with Authorization: Bearer <token>, signed as "
                "ingest/triggers/README.md shows"
            )

    def _secret_key(self) -> None:
        """The embedded default's key for secrets at rest: RUNLEDGER_SECRET_KEYS when set, else
        the key file (created here, readable by its owner only, on the first start)."""
        from django.conf import settings

        from ingest.engine import generate_key

        path = Path(settings.RUNLEDGER_SECRET_KEY_FILE)
        if os.environ.get("RUNLEDGER_SECRET_KEYS", "").strip():
            self.stdout.write("secrets at rest: encrypted with the keys of RUNLEDGER_SECRET_KEYS")
            return
        if not settings.RUNLEDGER_SECRET_KEYS:
            path.parent.mkdir(parents=True, exist_ok=True)
            # O_EXCL: never overwrite a key another process just wrote; 0600 from the first byte.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(generate_key() + "\n")
            settings.RUNLEDGER_SECRET_KEYS = [path.read_text().strip()]
            self.stdout.write(
                f"secrets at rest: created a key in {path} (mode 0600); keep it with "
                "the database — without it the stored secrets cannot be read"
            )
            return
        self.stdout.write(f"secrets at rest: encrypted with the key in {path}")

    def _serve(self, listener: socket.socket) -> None:
        from dashboard.asgi import application
        from dashboard.serving import serve

        serve(application, listener)
