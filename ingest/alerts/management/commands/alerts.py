"""`manage.py alerts`: the alert evaluator as a process of its own (beside the workers)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ingest.alerts.runner import INTERVAL_SECONDS, AlertRunner


class Command(BaseCommand):
    help = "Follow the history and check alert rules every second; send notifications through the engine."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--interval", type=float, default=INTERVAL_SECONDS)

    def handle(self, *args: Any, **options: Any) -> None:
        AlertRunner(interval=options["interval"]).run_until_signalled()
