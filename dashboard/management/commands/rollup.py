"""`python manage.py rollup`: keep the dashboard's rollups caught up with the ledger."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone

from dashboard.rollups.runner import INTERVAL_SECONDS, RollupRunner
from dashboard.rollups.services import rollup_rebuild


class Command(BaseCommand):
    help = (
        "Maintain the rollups the workflow DAG, costs and overview pages read (dashboard/rollups). "
        "Runs until stopped; start one or more beside the workers (one leads at a time). Pages stay "
        "exact without it, only slower."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--interval", type=float, default=INTERVAL_SECONDS, help="seconds between passes")
        parser.add_argument("--once", action="store_true", help="catch up once and exit")
        parser.add_argument(
            "--rebuild",
            action="store_true",
            help="drop every rollup row first (after ledger rows were written or deleted "
            "outside the engine, which leaves no history to follow)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["rebuild"]:
            rollup_rebuild(now=timezone.now())
            self.stdout.write("rollups dropped; catching up from the ledger's first hour")
        runner = RollupRunner(interval=options["interval"])
        if options["once"]:
            t0 = time.monotonic()
            passes = runner.catch_up()
            self.stdout.write(f"{passes} pass(es) in {time.monotonic() - t0:.1f} s")
            return
        self.stdout.write("rollups running; Ctrl-C stops them")
        runner.run_until_signalled()
