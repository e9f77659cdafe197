"""`runledger retry|replay|terminate|redrive|dead-letters|discard`: acting on a failed or
running instance, and on dead letters (listed with whether a retry can help, redriven after a
preview, discarded)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from dashboard.cli.client import Client
from dashboard.cli.instances import _id, _styled
from dashboard.cli.usage import UsageError, confirmed


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


def add_parsers(sub: Any) -> None:
    """`retry`, `replay`, `terminate`, `redrive`, `dead-letters` and `discard` under the CLI's commands."""
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
