"""The CLI's commands: argument parsing and rich output over dashboard/cli/client.py."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dashboard.attr_query import EXAMPLES as ATTR_EXAMPLES
from dashboard.attr_query import parse_attr_query
from dashboard.cli import connections, credentials, triggers
from dashboard.cli.client import ApiRefused, Client
from dashboard.cli.usage import UsageError, confirmed, json_object

FINISHED = {"complete", "errored", "terminated", "completed_with_errors"}
STATUS_STYLE = {
    "complete": "green",
    "errored": "red",
    "terminated": "dim",
    "running": "cyan",
    "queued": "yellow",
    "paused": "magenta",
    "waiting": "blue",
    "sleeping": "blue",
    "completed_with_errors": "yellow",
}


def _styled(status: str) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]"


def _id(instance_id: str) -> str:
    return quote(instance_id, safe="")


def cmd_list(api: Client, out: Console, a: argparse.Namespace) -> int:
    # The server's own parser, run here first: a bad term is named before anything is sent.
    _, problems = parse_attr_query(a.attr or [])
    if problems:
        raise UsageError("--attr: " + "; ".join(problems))
    page = api.get(
        "/instances",
        status=a.status,
        workflow=a.workflow,
        tenant=a.tenant,
        limit=a.limit,
        attr=a.attr or None,
        top_level="true" if a.top_level else None,
        parent=a.parent,
    )
    table = Table(title=f"{len(page['items'])} instance(s)", header_style="bold")
    for column in ("id", "workflow", "tenant", "status", "created"):
        table.add_column(column, overflow="fold")
    for item in page["items"]:
        table.add_row(item["id"], item["workflow"], item["tenant"], _styled(item["status"]), item["created_at"])
    out.print(table)
    return 0


def _steps_table(detail: dict[str, Any]) -> Table:
    table = Table(title="steps", header_style="bold")
    for column in ("#", "step", "kind", "status", "attempts", "error"):
        table.add_column(column, overflow="fold")
    for step in detail["steps"]:
        error = step.get("error") or {}
        table.add_row(
            str(step["position"]),
            step["name"],
            step["kind"],
            _styled(step["status"]),
            str(len(step["attempts"])),
            error.get("message", "") if error else "",
        )
    return table


def cmd_show(api: Client, out: Console, a: argparse.Namespace) -> int:
    detail = api.get(f"/instances/{_id(a.instance_id)}")
    out.print(f"[bold]{detail['id']}[/] {detail['workflow']} · tenant {detail['tenant']} · {_styled(detail['status'])}")
    out.print(f"params: {json.dumps(detail['params'], sort_keys=True)}")
    if detail.get("error"):
        out.print(f"[red]error[/]: {detail['error'].get('name', '')}: {detail['error'].get('message', '')}")
    if detail.get("output") is not None:
        out.print(f"output: {json.dumps(detail['output'], sort_keys=True)[:2000]}")
    out.print(_steps_table(detail))
    return 0


def cmd_tail(api: Client, out: Console, a: argparse.Namespace) -> int:
    """Follow an instance: a progress bar of its steps and every history line as it happens."""
    after: int | None = None
    deadline = time.monotonic() + a.timeout if a.timeout else None
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.0f} step(s) done"),
        TimeElapsedColumn(),
        console=out,
        transient=False,
    ) as bar:
        task = bar.add_task(a.instance_id, total=None)
        while True:
            # The state first, the history after it: a finished state's last lines are then
            # always printed before the loop ends.
            detail = api.get(f"/instances/{_id(a.instance_id)}")
            history = api.get(f"/instances/{_id(a.instance_id)}/history", after=after, limit=200)
            for line in history["items"]:
                after = line["id"]
                if line["kind"] == "step.log":
                    continue  # a running step's lines were written: `runledger logs --follow` prints them
                step = f" {line['step_name']}" if line["step_name"] else ""
                bar.console.print(
                    f"{line['created_at'][11:19]} {line['kind']}{step} {line['status']} "
                    f"[dim]{line['actor']}[/]".rstrip()
                )
            done = sum(s["status"] == "complete" for s in detail["steps"])
            finished = detail["status"] in FINISHED
            bar.update(
                task,
                completed=done,
                total=done if finished else None,
                description=f"{a.instance_id} {detail['status']}",
            )
            if history["next_after"] is not None:
                continue  # more history than one page: read on before sleeping
            if finished:
                break
            if deadline is not None and time.monotonic() >= deadline:
                out.print(f"still {detail['status']} after {a.timeout:g} s; stopped following")
                return 3
            time.sleep(a.interval)
    out.print(f"{a.instance_id} ended {_styled(detail['status'])}")
    return 0 if detail["status"] == "complete" else 4


LEVEL_STYLE = {"WARNING": "yellow", "ERROR": "red", "CRITICAL": "bold red", "DEBUG": "dim"}


def _logs_read(api: Client, a: argparse.Namespace) -> dict[str, Any]:
    """Every page of the instance's logs (or its step's), as one answer."""
    path = f"/instances/{_id(a.instance_id)}/logs"
    page = api.get(path, step=a.step, seq=a.seq)
    steps = list(page["steps"])
    while page["next_after"] is not None:
        page = api.get(path, step=a.step, seq=a.seq, after=page["next_after"])
        steps += page["steps"]
    return {**page, "steps": steps}


def _logs_print(out: Console, page: dict[str, Any], shown: dict[tuple[int, int], int]) -> int:
    """Print the lines not printed yet (`shown`: per step position and attempt, how many lines of
    it, the dropped ones included, are behind us); returns how many it printed."""
    printed = 0
    for step in page["steps"]:
        label = step["name"] + (f"#{step['seq']}" if step["seq"] > 1 else "")
        for attempt in step["attempts"]:
            key = (step["position"], attempt["number"])
            first = attempt["dropped"]  # the index of the first line kept
            behind = shown.get(key, 0)
            if behind < first:
                out.print(
                    f"[dim]… {first - behind} earlier line(s) of {escape(label)} attempt {attempt['number']} "
                    "left out (an attempt keeps only its last lines)[/]"
                )
                behind = first
            for index, line in enumerate(attempt["lines"], start=first):
                if index < behind:
                    continue
                style = LEVEL_STYLE.get(line["level"], "")
                level = f"[{style}]{line['level']:<7}[/]" if style else f"{line['level']:<7}"
                out.print(
                    f"{line['at'][11:23]} {escape(label)} a{attempt['number']} {level} "
                    f"[dim]{escape(line['logger'])}[/] {escape(line['message'])}",
                    highlight=False,
                )
                printed += 1
            shown[key] = max(behind, first + len(attempt["lines"]))
    return printed


def cmd_logs(api: Client, out: Console, a: argparse.Namespace) -> int:
    """What the instance's steps logged (or one step's), per attempt; --follow prints new lines as
    they are written until the instance finishes."""
    shown: dict[tuple[int, int], int] = {}
    deadline = time.monotonic() + a.timeout if a.timeout else None
    printed = 0
    while True:
        page = _logs_read(api, a)
        printed += _logs_print(out, page, shown)
        if not a.follow or page["status"] in FINISHED:
            break
        if deadline is not None and time.monotonic() >= deadline:
            out.print(f"still {page['status']} after {a.timeout:g} s; stopped following")
            return 3
        time.sleep(a.interval)
    if not printed:
        out.print(
            escape(
                f"step {a.step!r} of {a.instance_id} logged nothing"
                if a.step
                else f"no step of {a.instance_id} logged anything"
            )
        )
    return 0


def _start_attributes(terms: list[str]) -> dict[str, str]:
    """`--attr key=value` flags as an object; UsageError naming every flag that is not one."""
    values: dict[str, str] = {}
    problems = []
    for term in terms:
        key, equals, value = term.partition("=")
        if not equals or not key.strip() or not value.strip():
            problems.append(f"{term[:60]!r} is not key=value")
        elif key.strip() in values:
            problems.append(f"{key.strip()[:40]!r} is given twice")
        else:
            values[key.strip()] = value.strip()
    if problems:
        raise UsageError("--attr: " + "; ".join(problems) + "; nothing was started")
    return values


def cmd_start(api: Client, out: Console, a: argparse.Namespace) -> int:
    body: dict[str, Any] = {
        "workflow": a.workflow,
        "params": json_object(a.params, flag="--params"),
        "priority": a.priority,
    }
    if a.id:
        body["id"] = a.id
    if a.tenant:
        body["tenant"] = a.tenant
    if a.start_at:
        body["start_at"] = a.start_at
    if a.attr:
        body["search_attributes"] = _start_attributes(a.attr)
    new = api.post("/instances", body)
    out.print(f"started {new['id']} ({new['workflow']}, tenant {new['tenant']}, {_styled(new['status'])})")
    return 0


def _replay_hint(instance_id: str) -> str:
    return f"replay it with edited params instead: runledger replay {instance_id} --params '{{...}}' --reason '...'"


def cmd_retry(api: Client, out: Console, a: argparse.Namespace) -> int:
    """Retry from the failed step, as the instance was just read: when it moved before the retry
    lands (another operator acted), the API refuses it (stale) and nothing is done."""
    detail = api.get(f"/instances/{_id(a.instance_id)}")
    if detail.get("non_retryable"):
        failed: dict[str, Any] = next((s for s in detail["steps"] if s.get("non_retryable")), {})
        error = (failed.get("error") or {}).get("name", "NonRetryableError")
        out.print(
            f"[yellow]non-retryable[/]: step {failed.get('name', '?')} of {a.instance_id} failed with "
            f"{error}, which is not retried; a retry runs it on the same input and fails the same way. "
            + _replay_hint(a.instance_id)
        )
        if not confirmed(out, "retry anyway?", yes=a.yes):
            return 0
    api.post(f"/instances/{_id(a.instance_id)}/retry", {"reason": a.reason, "expected_version": detail["version"]})
    out.print(f"retried {a.instance_id} from its failed step")
    return 0


def cmd_dead_letters(api: Client, out: Console, a: argparse.Namespace) -> int:
    items = api.get("/dead-letters", state=a.state, workflow=a.workflow, tenant=a.tenant, limit=a.limit)
    table = Table(title=f"{len(items)} dead letter(s)", header_style="bold")
    for column in ("id", "instance", "tenant", "failed step", "error", "state", "retry"):
        table.add_column(column, overflow="fold")
    for d in items:
        table.add_row(
            str(d["id"]),
            d["instance_id"],
            d["tenant"],
            d["step_name"],
            f"{d['error_name']}: {d['error_message'][:120]}",
            d["state"],
            "[yellow]fails again: replay with edited params[/]" if d["non_retryable"] else "may help",
        )
    out.print(table)
    futile = [d for d in items if d["non_retryable"] and d["state"] == "open"]
    if futile:
        out.print(
            f"{len(futile)} of them failed for good (NonRetryableError): retrying or redriving them fails "
            f"the same way; {_replay_hint(futile[0]['instance_id'])}"
        )
    return 0


def cmd_discard(api: Client, out: Console, a: argparse.Namespace) -> int:
    body: dict[str, Any] = {"reason": a.reason}
    if a.expected_version:
        body["expected_version"] = a.expected_version
    done = api.post(f"/dead-letters/{a.dead_letter_id}/discard", body)
    out.print(f"discarded dead letter {done['id']} of {done['instance_id']}")
    return 0


def cmd_replay(api: Client, out: Console, a: argparse.Namespace) -> int:
    body: dict[str, Any] = {"reason": a.reason}
    if a.params is not None:
        try:
            body["params"] = json.loads(a.params)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--params is not valid JSON ({exc.msg}); give an object such as '{{\"a\": 1}}'") from None
    new = api.post(f"/instances/{_id(a.instance_id)}/replay", body)
    out.print(f"replayed {a.instance_id} as {new['id']} ({_styled(new['status'])})")
    return 0


def cmd_terminate(api: Client, out: Console, a: argparse.Namespace) -> int:
    api.post(f"/instances/{_id(a.instance_id)}/terminate", {"reason": a.reason, "rollback": a.rollback})
    out.print(f"terminated {a.instance_id}")
    return 0


def cmd_redrive(api: Client, out: Console, a: argparse.Namespace) -> int:
    """Preview, confirm, then redrive exactly the previewed set (the API refuses a changed one)."""
    selection: dict[str, Any] = {}
    if a.ids:
        selection["ids"] = [i.strip() for i in a.ids.split(",") if i.strip()]
    else:
        chosen = {k: getattr(a, k) for k in ("workflow", "tenant", "step_name", "signature") if getattr(a, k)}
        if not chosen:
            raise UsageError(
                "name the selection: --ids 4,7 or at least one filter (--workflow, --tenant, "
                "--step-name, --signature); nothing was done"
            )
        selection["filter"] = chosen
    preview = api.post("/dead-letters/redrive/preview", selection)
    out.print(f"{preview['count']} open dead letter(s) selected: {preview['ids'][:20]}")
    if preview["non_retryable_ids"]:
        out.print(
            f"[yellow]non-retryable[/]: {len(preview['non_retryable_ids'])} of them "
            f"({preview['non_retryable_ids'][:20]}) failed for good (NonRetryableError): a redrive fails "
            "them the same way; replay their instances with edited params instead (runledger replay ID "
            "--params '{...}' --reason '...')"
        )
    if not preview["count"]:
        return 0
    if not confirmed(out, "redrive exactly these?", yes=a.yes):
        return 0
    done = api.post(
        "/dead-letters/redrive", {**selection, "token": preview["token"], "rate_per_second": a.rate, "reason": a.reason}
    )
    out.print(f"redriven: {done['redriven']} at most {a.rate:g} per second")
    return 0


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
    ls = sub.add_parser("list", help="instances, newest first")
    for name in ("status", "workflow", "tenant"):
        ls.add_argument(f"--{name}")
    ls.add_argument(
        "--attr",
        action="append",
        metavar="TERM",
        help="search attributes, repeatable, all must hold: key:value, key:a|b (any of), key>=N, "
        f"key<N, key:N..M (numbers), !term (not); e.g. {ATTR_EXAMPLES}. Quote terms with "
        "| < > ! for the shell",
    )
    ls.add_argument(
        "--top-level",
        action="store_true",
        help="leave out fan-out items and child runs (as the console's list does by default)",
    )
    ls.add_argument("--parent", metavar="ID", help="only the fan-out items and child runs of instance ID")
    ls.add_argument("--limit", type=int, default=20)
    start = sub.add_parser(
        "start",
        help="start a run of a workflow",
        description="Start a run of WORKFLOW in one of the token's tenants (the token's user must be an "
        "operator there); prints the new instance's id. Audited like every action.",
    )
    start.add_argument("workflow", metavar="WORKFLOW", help="the workflow's name, e.g. gong-ingest")
    start.add_argument(
        "--params",
        metavar="JSON",
        required=True,
        help="the run's params, a JSON object, e.g. '{\"call_id\": \"7712\"}' ('{}' for none)",
    )
    start.add_argument("--id", metavar="ID", help="the instance id (default: a new one); an id already used is refused")
    start.add_argument("--tenant", metavar="T", help="the tenant the run belongs to (default: 'default')")
    start.add_argument(
        "--priority", metavar="N", type=int, default=0, help="-1000 to 1000, higher runs first (default 0)"
    )
    start.add_argument(
        "--start-at", metavar="TIME", help="first turn at this ISO 8601 time, e.g. 2026-12-01T09:00:00Z (default: now)"
    )
    start.add_argument(
        "--attr",
        action="append",
        metavar="KEY=VALUE",
        default=[],
        help="a search attribute the run starts with, to find it by (runledger list --attr); "
        "repeat for more, e.g. --attr customer=acme --attr backfill=true",
    )
    for name, text in (("show", "an instance and its steps"), ("tail", "follow an instance live")):
        one = sub.add_parser(name, help=text)
        one.add_argument("instance_id")
    tail = sub.choices["tail"]
    tail.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    tail.add_argument("--timeout", type=float, default=0.0, help="stop following after this many seconds (0: never)")
    logs = sub.add_parser(
        "logs",
        help="what an instance's steps logged, per attempt",
        description="Print the lines each step attempt of INSTANCE logged (its last lines, "
        "secrets redacted), oldest first; --follow prints new ones as they are "
        "written until the instance finishes.",
    )
    logs.add_argument("instance_id", metavar="INSTANCE")
    logs.add_argument("--step", metavar="NAME", help="only this step (every call of it, or --seq N for its Nth)")
    logs.add_argument("--seq", metavar="N", type=int, help="with --step: its Nth call")
    logs.add_argument("--follow", "-f", action="store_true", help="print new lines until the instance finishes")
    logs.add_argument("--interval", type=float, default=1.0, help="seconds between polls with --follow")
    logs.add_argument("--timeout", type=float, default=0.0, help="stop following after this many seconds (0: never)")
    for name in ("retry", "replay", "terminate"):
        act = sub.add_parser(name, help=f"{name} an instance")
        act.add_argument("instance_id")
        act.add_argument("--reason", required=True, help="recorded in the history and the audit log")
    sub.choices["retry"].add_argument(
        "--yes", action="store_true", help="retry even a step that failed for good (NonRetryableError)"
    )
    sub.choices["replay"].add_argument("--params", help="edited params, a JSON object")
    sub.choices["terminate"].add_argument("--rollback", action="store_true")
    redrive = sub.add_parser("redrive", help="redrive dead letters (preview, then confirm)")
    redrive.add_argument("--ids", help="comma-separated dead letter ids")
    for name in ("workflow", "tenant", "step-name", "signature"):
        redrive.add_argument(f"--{name}")
    redrive.add_argument("--rate", type=float, default=5.0, help="instances restarted per second")
    redrive.add_argument("--reason", required=True)
    redrive.add_argument("--yes", action="store_true", help="do not ask before acting")
    letters = sub.add_parser("dead-letters", help="dead letters, newest first, with whether a retry can help")
    letters.add_argument("--state", default="open", choices=("open", "redriven", "discarded", ""))
    for name in ("workflow", "tenant"):
        letters.add_argument(f"--{name}")
    letters.add_argument("--limit", type=int, default=20)
    discard = sub.add_parser("discard", help="discard a dead letter (nothing runs)")
    discard.add_argument("dead_letter_id", type=int)
    discard.add_argument("--reason", required=True)
    discard.add_argument("--expected-version", help="refuse if the letter moved past this version (its `version`)")
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
