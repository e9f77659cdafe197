"""`manage.py runledger ...`: the `runledger` CLI (dashboard/cli) from a checkout without the
console script installed. It still goes through the REST API with a token, like from any machine."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.cli import main


class Command(BaseCommand):
    help = "The operators' CLI over the REST API: list, show, tail, retry, replay, terminate, redrive."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs="*", help="as for `runledger` (try: manage.py runledger --help)")

    def run_from_argv(self, argv: list[str]) -> None:
        # Everything after the command name belongs to the CLI's own parser, options included.
        code = main(argv[2:])
        if code:
            raise SystemExit(code)

    def handle(self, *args: Any, **options: Any) -> None:
        code = main(list(args))
        if code:
            raise CommandError(f"runledger exited with status {code}")
