"""The CLI's entry point: its parser (the global options, then each group's commands), the table
from command name to function, and `main`, which runs one and prints the API's refusals.

The commands themselves are in dashboard/cli/instances.py (list, start, show, tail, logs),
dashboard/cli/recovery.py (retry, replay, terminate, redrive, dead-letters, discard),
dashboard/cli/triggers.py, dashboard/cli/credentials.py and dashboard/cli/connections.py."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from rich.console import Console

from dashboard.cli import connections, credentials, instances, recovery, triggers
from dashboard.cli.client import ApiRefused, Client
from dashboard.cli.instances import cmd_list, cmd_logs, cmd_show, cmd_start, cmd_tail
from dashboard.cli.recovery import cmd_dead_letters, cmd_discard, cmd_redrive, cmd_replay, cmd_retry, cmd_terminate
from dashboard.cli.usage import UsageError

COMMANDS: dict[str, Callable[[Client, Console, argparse.Namespace], int]] = {
    "list": cmd_list,
    "show": cmd_show,
    "start": cmd_start,
    "tail": cmd_tail,
    "logs": cmd_logs,
    "retry": cmd_retry,
    "replay": cmd_replay,
    "terminate": cmd_terminate,
    "redrive": cmd_redrive,
    "dead-letters": cmd_dead_letters,
    "discard": cmd_discard,
}


EXAMPLES = """examples:
  runledger schedules create nightly-sync --tenant acme --workflow gong-ingest --cron '0 3 * * *' \\
      --timezone Europe/Paris --params '{"account": "acme"}'
  runledger routes create orders --tenant acme --workflow url-classify --rate-limit-per-minute 600
  runledger routes disable orders
  runledger subscriptions create --tenant acme --pattern 'user.*' --workflow url-classify
  runledger credentials create --tenant acme --name shop
  runledger credentials rotate acme shop --reason "yearly rotation" --overlap 3600

Each group has --help (runledger routes create --help). A refused request prints every wrong
field at once and changes nothing."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="runledger",
        description="Operate Runledger over its REST API.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXAMPLES,
    )
    p.add_argument(
        "--url",
        default=os.environ.get("RUNLEDGER_URL", "http://127.0.0.1:8000"),
        help="the dashboard's base URL (default $RUNLEDGER_URL or http://127.0.0.1:8000)",
    )
    p.add_argument(
        "--token",
        default=os.environ.get("RUNLEDGER_TOKEN", ""),
        help="an API token (default $RUNLEDGER_TOKEN); make one on the console's "
        "/tokens/ page or with `manage.py token create`",
    )
    sub = p.add_subparsers(dest="command", required=True)
    instances.add_parsers(sub)
    recovery.add_parsers(sub)
    triggers.add_parsers(sub)
    credentials.add_parsers(sub)
    connections.add_parsers(sub)
    return p


def where_tokens(url: str) -> str:
    """Where a user gets a token: the console's page, or the server's management command."""
    return (
        f"Create a token at {url.rstrip('/')}/tokens/ (signed in to the console), or on the "
        "server: manage.py token create --user YOUR_USERNAME --name cli"
    )


def main(argv: Sequence[str] | None = None, *, console: Console | None = None) -> int:
    args = parser().parse_args(argv)
    out = console or Console()
    if not args.token:
        out.print(f"[red]no API token[/]: pass --token or set RUNLEDGER_TOKEN. {where_tokens(args.url)}")
        return 2
    command = getattr(args, "run", None) or COMMANDS[args.command]
    try:
        return command(Client(url=args.url, token=args.token), out, args)
    except ApiRefused as exc:
        out.print(f"[red]refused[/]: {exc.message} [dim]({exc.code}, HTTP {exc.status})[/]")
        for field, problem in exc.fields.items():
            out.print(f"  [bold]{field}[/]: {problem}")
        if exc.status == 401:
            out.print(f"The token was not accepted (unknown, expired or revoked). {where_tokens(args.url)}")
        return 1
    except UsageError as exc:
        out.print(f"[red]usage[/]: {exc}")
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
