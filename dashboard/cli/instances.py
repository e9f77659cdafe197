"""`runledger list|start|show|tail|logs`: reading instances (a list, one with its steps, one
followed live, what its steps logged) and starting a run; the status colours every command prints
with."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any
from urllib.parse import quote

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dashboard.attr_query import EXAMPLES as ATTR_EXAMPLES
from dashboard.attr_query import parse_attr_query
from dashboard.cli.client import Client
from dashboard.cli.usage import UsageError, json_object

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


def add_parsers(sub: Any) -> None:
    """`list`, `start`, `show`, `tail` and `logs` under the CLI's commands."""
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
