"""`runledger connections list|show|create|edit|enable|disable|test|delete`: the tenants' source
connections over the REST API. Secrets are write-only there too: `show` prints whether each is set
and its masked end. A secret given as `-` is read from standard input (hidden at a terminal), so
it is not left in the shell's history or the process list; an edit that leaves a secret out keeps
the stored one. The server checks every field and names every wrong one at once."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import Any
from urllib.parse import quote

from rich.console import Console
from rich.table import Table

from dashboard.cli.client import Client
from dashboard.cli.usage import UsageError, confirmed, json_object

KINDS = ("gong", "salesforce", "llm", "dataforseo", "zenrows")
SECRETS = ("key", "secret", "refresh_token", "webhook_key")
PLAIN = ("base_url", "provider", "model", "service", "organization_id")


def _path(a: argparse.Namespace) -> str:
    return f"/connections/{quote(a.tenant, safe='')}/{quote(a.kind, safe='')}"


def _secret(value: str, flag: str) -> str:
    if value != "-":
        return value
    if sys.stdin.isatty():
        return getpass.getpass(f"{flag}: ")
    line = sys.stdin.readline()
    if not line:
        raise UsageError(f"{flag} - reads the value from standard input, which was empty; nothing was done")
    return line.rstrip("\r\n")


def _body(a: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for name in PLAIN:
        if getattr(a, name, None) is not None:
            body[name] = getattr(a, name)
    for name in SECRETS:
        if getattr(a, name, None) is not None:
            body[name] = _secret(getattr(a, name), f"--{name.replace('_', '-')}")
    if getattr(a, "options", None) is not None:
        body["options"] = json_object(a.options, flag="--options")
    if getattr(a, "enabled", None) is not None:
        body["enabled"] = a.enabled
    return body


def _state(c: dict[str, Any]) -> str:
    return "[green]enabled[/]" if c["enabled"] else "[yellow]disabled[/]"


def _tested(c: dict[str, Any]) -> str:
    if not c["last_tested_at"]:
        return "never tested"
    return f"{'ok' if c['last_test_ok'] else 'failed'} at {c['last_tested_at'][:19].replace('T', ' ')}"


def _secrets(c: dict[str, Any]) -> str:
    return ", ".join(f"{s['name']} {'set, ends ' + s['ends'] if s['set'] else 'not set'}" for s in c["secrets"])


def connections_list(api: Client, out: Console, a: argparse.Namespace) -> int:
    rows = api.get("/connections")
    table = Table(title=f"{len(rows)} connection(s)", header_style="bold")
    for column in ("tenant", "kind", "secrets", "last test", "pull cursor", "state"):
        table.add_column(column, overflow="fold")
    for c in rows:
        pull = c["pull"]
        cursor = "—" if pull is None else (pull["cursor"] or "never pulled") if pull["pulled"] else "pulls off"
        table.add_row(c["tenant"], c["kind"], _secrets(c), _tested(c), cursor, _state(c))
    out.print(table)
    return 0


def _line(out: Console, c: dict[str, Any], said: str = "") -> None:
    out.print(
        f"{said}[bold]{c['tenant']}/{c['kind']}[/] · {_state(c)} · {c['base_url'] or 'default base URL'}"
        + (f" · {c['provider']} {c['model']}".rstrip() if c["provider"] else "")
        + f" · version {c['version']}"
    )
    out.print(f"secrets: {_secrets(c) or 'none'}", highlight=False)
    out.print(
        f"last test: {_tested(c)}" + (f" — {c['last_test_message']}" if c["last_test_message"] else ""), highlight=False
    )
    if c["options"]:
        out.print(f"options: {json.dumps(c['options'], sort_keys=True)}", highlight=False)


def connections_show(api: Client, out: Console, a: argparse.Namespace) -> int:
    _line(out, api.get(_path(a)))
    return 0


def connections_create(api: Client, out: Console, a: argparse.Namespace) -> int:
    _line(out, api.post("/connections", {"tenant": a.tenant, "kind": a.kind, **_body(a)}), "created ")
    return 0


def connections_edit(api: Client, out: Console, a: argparse.Namespace) -> int:
    body = _body(a)
    if a.version:
        body["version"] = a.version
    _line(out, api.patch(_path(a), body), "saved ")
    return 0


def _switch(enabled: bool) -> Any:
    def run(api: Client, out: Console, a: argparse.Namespace) -> int:
        action = "enable" if enabled else "disable"
        api.call("POST", f"{_path(a)}/{action}", params={"version": a.version} if a.version else None)
        out.print(f"{a.tenant}/{a.kind} {action}d")
        return 0

    return run


def connections_test(api: Client, out: Console, a: argparse.Namespace) -> int:
    outcome = api.post(f"{_path(a)}/test", {})
    out.print(("[green]ok[/]: " if outcome["ok"] else "[red]failed[/]: ") + outcome["message"], highlight=False)
    return 0 if outcome["ok"] else 1


def connections_delete(api: Client, out: Console, a: argparse.Namespace) -> int:
    if not confirmed(out, f"delete the {a.kind} connection of {a.tenant} and its secrets?", yes=a.yes):
        return 0
    api.call("DELETE", _path(a), params={"version": a.version} if a.version else None)
    out.print(f"deleted {a.tenant}/{a.kind}; its workflows fall back on the environment's settings")
    return 0


def _target(p: argparse.ArgumentParser) -> None:
    p.add_argument("tenant", metavar="TENANT")
    p.add_argument("kind", metavar="KIND", choices=KINDS, help=", ".join(KINDS))


def _fields(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base-url", dest="base_url", metavar="URL", help="the provider's address (empty: its own)")
    p.add_argument("--provider", choices=("openai", "anthropic", "rules", "demo"), help="llm only")
    p.add_argument("--model", help="llm only, e.g. gpt-4o-mini")
    p.add_argument("--service", help="llm only: the name its costs are recorded under")
    p.add_argument("--organization-id", dest="organization_id", help="salesforce only: the org's id")
    secrets = {
        "key": "gong access key, salesforce client id, dataforseo login",
        "secret": "gong access key secret, salesforce client secret, llm/zenrows API key, dataforseo password",
        "refresh_token": "salesforce refresh token",
        "webhook_key": "gong/salesforce webhook key",
    }
    for name, what in secrets.items():
        p.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            metavar="VALUE|-",
            help=f"{what}; '-' reads it from standard input",
        )
    p.add_argument("--options", metavar="JSON", help="e.g. '{\"reconcile\": false}'")
    p.add_argument("--enabled", action=argparse.BooleanOptionalAction, help="use it (default: enabled)")


def _add(group: Any, name: str, run: Any, help_text: str, description: str | None = None) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = group.add_parser(name, help=help_text, description=description or help_text)
    p.set_defaults(run=run)
    return p


def add_parsers(sub: Any) -> None:
    group = sub.add_parser(
        "connections", help="source connections: list, show, create, edit, enable, disable, test, delete"
    ).add_subparsers(dest="action", required=True)
    _add(group, "list", connections_list, "the connections of the token's tenants, with their last test and pull")
    _target(_add(group, "show", connections_show, "a connection: settings, secrets as set or not, last test"))
    create = _add(
        group,
        "create",
        connections_create,
        "add a tenant's connection of a kind",
        "Add TENANT's connection of KIND. Each kind takes its own fields (gong: --key --secret "
        "[--webhook-key]; salesforce: --key --secret [--refresh-token --webhook-key --organization-id]; "
        "llm: --provider [--secret --model --service]; dataforseo: --key --secret; zenrows: --secret). "
        "Every wrong field is named at once and nothing is saved.",
    )
    _target(create)
    _fields(create)
    edit = _add(group, "edit", connections_edit, "change a connection (a secret left out keeps the stored one)")
    _target(edit)
    _fields(edit)
    edit.add_argument("--version", help="refuse if it was saved since this version (`show` prints it)")
    for name, enabled in (("enable", True), ("disable", False)):
        p = _add(group, name, _switch(enabled), f"{name} a connection")
        _target(p)
        p.add_argument("--version", help="refuse if it was saved since this version")
    _target(
        _add(
            group,
            "test",
            connections_test,
            "one cheap, unbilled call with the stored settings (exit status 1 when it fails)",
        )
    )
    delete = _add(group, "delete", connections_delete, "delete a connection and its secrets (asks first)")
    _target(delete)
    delete.add_argument("--version", help="refuse if it was saved since this version")
    delete.add_argument("--yes", action="store_true", help="do not ask before deleting")
