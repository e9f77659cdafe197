"""`runledger credentials list|create|rotate|enable|disable|delete`: ingress credentials over the
REST API. A new or rotated pair is printed once, here, and can never be read again; a rotation asks
first, says why (the audit log keeps the reason) and keeps the old pair working for `--overlap`
seconds. A disabled credential signs nothing until it is enabled; a deletion asks first."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from rich.console import Console
from rich.table import Table

from dashboard.cli.client import Client
from dashboard.cli.usage import confirmed


def _pair(out: Console, pair: dict[str, Any]) -> None:
    out.print(f"[bold]{pair['tenant']}/{pair['name']}[/]: store these now, they are not shown again")
    out.print(f"token:  {pair['token']}", soft_wrap=True, highlight=False)
    out.print(f"secret: {pair['secret']}", soft_wrap=True, highlight=False)


def credentials_list(api: Client, out: Console, a: argparse.Namespace) -> int:
    rows = api.get("/ingress-credentials")
    table = Table(title=f"{len(rows)} ingress credential(s)", header_style="bold")
    for column in ("tenant", "name", "token", "rotated", "old pair works until"):
        table.add_column(column, overflow="fold")
    for c in rows:
        table.add_row(
            c["tenant"],
            c["name"],
            c["token_prefix"] + "…",
            c["rotated_at"] or "never",
            (c["previous_token_prefix"] + "… until " + c["previous_valid_until"]) if c["previous_valid_until"] else "—",
        )
    out.print(table)
    return 0


def credentials_create(api: Client, out: Console, a: argparse.Namespace) -> int:
    body: dict[str, Any] = {"tenant": a.tenant, "name": a.name}
    if a.rate_limit_per_minute is not None:
        body["rate_limit_per_minute"] = a.rate_limit_per_minute
    _pair(out, api.post("/ingress-credentials", body))
    return 0


def credentials_rotate(api: Client, out: Console, a: argparse.Namespace) -> int:
    overlap = "the server's default (one hour)" if a.overlap is None else f"{a.overlap} s"
    if not confirmed(out, f"rotate {a.tenant}/{a.name}? the old pair keeps working for {overlap}", yes=a.yes):
        return 0
    body: dict[str, Any] = {"reason": a.reason}
    if a.overlap is not None:
        body["overlap_seconds"] = a.overlap
    pair = api.post(f"/ingress-credentials/{quote(a.tenant, safe='')}/{quote(a.name, safe='')}/rotate", body)
    _pair(out, pair)
    until = pair.get("previous_valid_until")
    out.print(f"the old pair works until {until}" if until else "the old pair no longer works")
    return 0


def _where(a: argparse.Namespace) -> str:
    return f"/ingress-credentials/{quote(a.tenant, safe='')}/{quote(a.name, safe='')}"


def credentials_enable(api: Client, out: Console, a: argparse.Namespace) -> int:
    api.post(f"{_where(a)}/enable", {})
    out.print(f"{a.tenant}/{a.name} enabled: requests signed with it are accepted again")
    return 0


def credentials_disable(api: Client, out: Console, a: argparse.Namespace) -> int:
    api.post(f"{_where(a)}/disable", {})
    out.print(f"{a.tenant}/{a.name} disabled: requests signed with it answer 401 until it is enabled")
    return 0


def credentials_delete(api: Client, out: Console, a: argparse.Namespace) -> int:
    if not confirmed(out, f"delete {a.tenant}/{a.name}? requests signed with it answer 401 for good", yes=a.yes):
        return 0
    api.delete(_where(a))
    out.print(f"deleted {a.tenant}/{a.name}; the instances its callers started stay")
    return 0


def add_parsers(sub: Any) -> None:
    group = sub.add_parser(
        "credentials", help="ingress credentials: list, create, rotate, enable, disable, delete"
    ).add_subparsers(dest="action", required=True)
    group.add_parser("list", help="credentials by token prefix, never a token or secret").set_defaults(
        run=credentials_list
    )
    create = group.add_parser(
        "create",
        help="a new credential; its token and secret are printed once",
        description="A new ingress credential of TENANT, with which callers sign "
        "POST /api/routes/<name>. Its token and HMAC secret are printed once.",
    )
    create.set_defaults(run=credentials_create)
    create.add_argument("--tenant", required=True, metavar="T", help="a tenant you operate")
    create.add_argument(
        "--name", default="default", metavar="N", help="letters, digits, '_', '.' or '-' (default: default)"
    )
    create.add_argument(
        "--rate-limit-per-minute",
        dest="rate_limit_per_minute",
        type=int,
        metavar="N",
        help="requests a minute across the tenant's routes with it",
    )
    rotate = group.add_parser(
        "rotate",
        help="a new token and secret (asks first); the old pair works for --overlap seconds",
        description="Replace the token and HMAC secret of TENANT/NAME; the new pair is printed once. The old "
        "pair keeps working for --overlap seconds (default one hour; 0 stops it at once), then "
        "is refused with 401. Audited with --reason.",
    )
    rotate.set_defaults(run=credentials_rotate)
    rotate.add_argument("tenant", metavar="TENANT")
    rotate.add_argument("name", metavar="NAME")
    rotate.add_argument("--reason", required=True, help="why, kept in the audit log")
    rotate.add_argument(
        "--overlap", type=int, metavar="SECONDS", help="how long the old pair keeps working, 0 to 604800 (default 3600)"
    )
    rotate.add_argument("--yes", action="store_true", help="do not ask before rotating")
    for action, run, what in (
        ("enable", credentials_enable, "accept requests signed with it again"),
        ("disable", credentials_disable, "refuse requests signed with it (401) for now"),
        ("delete", credentials_delete, "delete it for good (asks first)"),
    ):
        p = group.add_parser(action, help=what, description=f"{action.title()} TENANT/NAME: {what}. Audited.")
        p.set_defaults(run=run)
        p.add_argument("tenant", metavar="TENANT")
        p.add_argument("name", metavar="NAME")
        if action == "delete":
            p.add_argument("--yes", action="store_true", help="do not ask before deleting")
