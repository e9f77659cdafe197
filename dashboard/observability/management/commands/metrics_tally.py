"""`manage.py metrics_tally`: keep the metrics' counters stored up to the history's settled end.

Scrapes fold the history rows after the stored cursor themselves and store a few thousand at a
time, so this command is not needed for correct figures; run it beside `manage.py rollup` on a
busy ledger (scrapes stay cheap), and once with --once after deploying onto a large ledger (the
first catch-up reads the whole history). Any number may run: one advances at a time.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from dashboard.observability.tally import BATCH, tally_advance


class Command(BaseCommand):
    help = "Fold the history into the metrics' stored counters (every 5 s; --once: catch up and exit)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="catch up to the settled end and exit")
        parser.add_argument("--every", type=float, default=5.0, help="seconds between passes (default 5)")

    def handle(self, *args: Any, **options: Any) -> None:
        total, started = 0, time.monotonic()
        while True:
            folded = tally_advance(now=timezone.now(), batch=BATCH)
            total += folded
            if folded:
                continue
            if options["once"]:
                self.stdout.write(f"metrics tally: {total} history rows folded in {time.monotonic() - started:.1f} s")
                return
            time.sleep(max(0.1, options["every"]))
