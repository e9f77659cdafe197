"""`python manage.py retention`: archive and purge finished instances past their workflow's
`retention_days` (default 30), in batches, once an hour (or `--once`)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone

from ingest.engine.retention_runner import (
    INTERVAL_SECONDS,
    RetentionRunner,
    archive_dir,
    retention_round,
)


class Command(BaseCommand):
    help = (
        "Archive finished instances older than their workflow's retention_days to gzip JSON "
        "lines (RUNLEDGER_ARCHIVE_DIR) and purge them; open dead letters and pending approvals "
        "are never purged."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--interval", type=float, default=INTERVAL_SECONDS, help="seconds between rounds")
        parser.add_argument("--once", action="store_true", help="one round, then exit")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["once"]:
            result = retention_round(now=timezone.now())
            if result is None:
                self.stdout.write("another retention runner holds the lock; nothing done")
                return
            total = sum(result.purged.values())
            self.stdout.write(
                f"purged {total} instance(s) in {result.batches} batch(es) "
                f"{dict(sorted(result.purged.items()))}; archive: {archive_dir()}"
            )
            return
        self.stdout.write(f"retention running every {options['interval']:g} s; Ctrl-C stops it")
        RetentionRunner(interval=options["interval"]).run_until_signalled()
