"""`runledger schedules|routes|subscriptions|credentials ...`: what starts workflows, set up over
the REST API. The server checks every field (the same check as the console's forms) and names
every wrong one at once; this module only reads the command line and prints the answers. Flags
are the API's field names with dashes (`--wait-seconds` is `wait_seconds`)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from rich.console import Console
from rich.table import Table

from dashboard.cli.client import Client
from dashboard.cli.usage import confirmed, json_object

Command = Callable[[Client, Console, argparse.Namespace], int]


def _q(value: str) -> str:
    return quote(value, safe="")


def _state(row: dict[str, Any]) -> str:
    return "[green]enabled[/]" if row["enabled"] else "[yellow]disabled[/]"


def _table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> Table:
    table = Table(title=title, header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _body(a: argparse.Namespace, names: tuple[str, ...], *, json_fields: tuple[str, ...] = ()) -> dict[str, Any]:
    """The flags given (not left at None) as an API body; JSON flags parsed."""
    body: dict[str, Any] = {}
    for name in names:
        value = getattr(a, name, None)
        if value is not None:
            body[name] = json_object(value, flag=f"--{name.replace('_', '-')}") if name in json_fields else value
    return body


# --- schedules ----------------------------------------------------------------------------

SCHEDULE_FIELDS = ("workflow", "cron", "timezone", "missed_fire_policy", "catch_up_limit", "params", "enabled")


def _schedule_line(s: dict[str, Any]) -> str:
    fires = ", ".join(f[:16].replace("T", " ") for f in s["next_fires"][:3]) or "none"
    return (
        f"[bold]{s['name']}[/] starts {s['workflow']} in {s['tenant']} on '{s['cron']}' ({s['timezone']}) · "
        f"{_state(s)} · next: {fires}"
    )


def schedules_list(api: Client, out: Console, a: argparse.Namespace) -> int:
    rows = api.get("/schedules")
    out.print(
        _table(
            f"{len(rows)} schedule(s)",
            ("name", "workflow", "tenant", "cron", "zone", "state", "next fire"),
            [
                (
                    s["name"],
                    s["workflow"],
                    s["tenant"],
                    s["cron"],
                    s["timezone"],
                    _state(s),
                    (s["next_fires"] or ["—"])[0],
                )
                for s in rows
            ],
        )
    )
    return 0


def schedules_show(api: Client, out: Console, a: argparse.Namespace) -> int:
    s = api.get(f"/schedules/{_q(a.name)}")
    out.print(_schedule_line(s))
    out.print(
        f"params: {json.dumps(s['params'], sort_keys=True)} · missed fires: {s['missed_fire_policy']}"
        f" (latest {s['catch_up_limit']}) · last: {s['last_instance_id'] or 'never fired'}"
    )
    return 0


def schedules_create(api: Client, out: Console, a: argparse.Namespace) -> int:
    body = {"name": a.name, "tenant": a.tenant, **_body(a, SCHEDULE_FIELDS, json_fields=("params",))}
    out.print("created " + _schedule_line(api.post("/schedules", body)))
    return 0


def schedules_edit(api: Client, out: Console, a: argparse.Namespace) -> int:
    out.print(
        "saved "
        + _schedule_line(api.patch(f"/schedules/{_q(a.name)}", _body(a, SCHEDULE_FIELDS, json_fields=("params",))))
    )
    return 0


def schedules_run(api: Client, out: Console, a: argparse.Namespace) -> int:
    fired = api.post(f"/schedules/{_q(a.name)}/run", {})
    out.print(f"{a.name} fired now: instance {fired['instance_id']}")
    return 0


# --- routes -------------------------------------------------------------------------------

ROUTE_FIELDS = (
    "workflow",
    "enabled",
    "sync_default",
    "wait_seconds",
    "rate_limit_per_minute",
    "idempotency_ttl_seconds",
    "priority",
    "description",
)


def _route_line(r: dict[str, Any]) -> str:
    limit = f" · at most {r['rate_limit_per_minute']}/min" if r["rate_limit_per_minute"] else ""
    return f"[bold]{r['name']}[/] starts {r['workflow']} in {r['tenant']} · {_state(r)}{limit}"


def routes_list(api: Client, out: Console, a: argparse.Namespace) -> int:
    rows = api.get("/routes")
    out.print(
        _table(
            f"{len(rows)} route(s)",
            ("name", "workflow", "tenant", "state", "last delivery"),
            [
                (
                    r["name"],
                    r["workflow"],
                    r["tenant"],
                    _state(r),
                    r["deliveries"][0]["instance_id"] if r["deliveries"] else "—",
                )
                for r in rows
            ],
        )
    )
    return 0


def routes_show(api: Client, out: Console, a: argparse.Namespace) -> int:
    r = api.get(f"/routes/{_q(a.name)}/detail")
    out.print(_route_line(r))
    out.print(
        f"POST /api/routes/{r['name']} · wait {r['wait_seconds']:g} s{' (by default)' if r['sync_default'] else ''}"
        f" · idempotency keys {r['idempotency_ttl_seconds']} s · priority {r['priority']}"
    )
    for d in r["deliveries"]:
        out.print(f"  {d['at'][:19].replace('T', ' ')} {d['instance_id']} {d['status']}")
    return 0


def routes_create(api: Client, out: Console, a: argparse.Namespace) -> int:
    body = {"name": a.name, "tenant": a.tenant, **_body(a, ROUTE_FIELDS)}
    out.print("created " + _route_line(api.post("/routes", body)))
    return 0


def routes_edit(api: Client, out: Console, a: argparse.Namespace) -> int:
    out.print("saved " + _route_line(api.patch(f"/routes/{_q(a.name)}/detail", _body(a, ROUTE_FIELDS))))
    return 0


# --- subscriptions ------------------------------------------------------------------------

SUBSCRIPTION_FIELDS = ("workflow", "pattern", "filters", "enabled")


def _subscription_line(s: dict[str, Any]) -> str:
    filters = f" with {json.dumps(s['filters'], sort_keys=True)}" if s["filters"] else ""
    return (
        f"[bold]#{s['id']}[/] events '{s['pattern']}'{filters} of {s['tenant'] or 'every tenant'} start "
        f"{s['workflow']} · {_state(s)}"
    )


def subscriptions_list(api: Client, out: Console, a: argparse.Namespace) -> int:
    rows = api.get("/subscriptions")
    out.print(
        _table(
            f"{len(rows)} subscription(s)",
            ("id", "pattern", "workflow", "tenant", "state"),
            [(str(s["id"]), s["pattern"], s["workflow"], s["tenant"] or "every tenant", _state(s)) for s in rows],
        )
    )
    return 0


def subscriptions_show(api: Client, out: Console, a: argparse.Namespace) -> int:
    s = api.get(f"/subscriptions/{a.id}")
    out.print(_subscription_line(s))
    for d in s["deliveries"]:
        out.print(f"  {d['at'][:19].replace('T', ' ')} {d['event_type']} → {d['instance_id']} {d['status']}")
    return 0


def subscriptions_create(api: Client, out: Console, a: argparse.Namespace) -> int:
    body = {"tenant": a.tenant, **_body(a, SUBSCRIPTION_FIELDS, json_fields=("filters",))}
    out.print("created " + _subscription_line(api.post("/subscriptions", body)))
    return 0


def subscriptions_edit(api: Client, out: Console, a: argparse.Namespace) -> int:
    changed = api.patch(f"/subscriptions/{a.id}", _body(a, SUBSCRIPTION_FIELDS, json_fields=("filters",)))
    out.print("saved " + _subscription_line(changed))
    return 0


# --- enable, disable, delete: the same for the three -----------------------------------------


def _path(kind: str, a: argparse.Namespace) -> str:
    return {
        "schedules": f"/schedules/{_q(getattr(a, 'name', ''))}",
        "routes": f"/routes/{_q(getattr(a, 'name', ''))}",
        "subscriptions": f"/subscriptions/{getattr(a, 'id', '')}",
    }[kind]


def _switch(kind: str, enabled: bool) -> Command:
    def run(api: Client, out: Console, a: argparse.Namespace) -> int:
        api.post(f"{_path(kind, a)}/{'enable' if enabled else 'disable'}", {})
        out.print(
            f"{kind[:-1]} {getattr(a, 'name', None) or getattr(a, 'id', '')} {'enabled' if enabled else 'disabled'}"
        )
        return 0

    return run


def _delete(kind: str) -> Command:
    def run(api: Client, out: Console, a: argparse.Namespace) -> int:
        label = f"{kind[:-1]} {getattr(a, 'name', None) or getattr(a, 'id', '')}"
        if not confirmed(out, f"delete {label}?", yes=a.yes):
            return 0
        api.delete(_path(kind, a) + ("/detail" if kind == "routes" else ""))
        out.print(f"deleted {label}; the instances it started stay")
        return 0

    return run


# --- the command line ---------------------------------------------------------------------


def _action(
    group: Any, name: str, run: Command, help_text: str, key: str | None = None, description: str | None = None
) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = group.add_parser(name, help=help_text, description=description or help_text)
    p.set_defaults(run=run)
    if key == "name":
        p.add_argument("name", metavar="NAME")
    elif key == "id":
        p.add_argument("id", metavar="ID", type=int, help="the subscription's id (see `subscriptions list`)")
    return p


def _switches(group: Any, kind: str, key: str) -> None:
    _action(group, "enable", _switch(kind, True), f"enable a {kind[:-1]}", key)
    _action(group, "disable", _switch(kind, False), f"disable a {kind[:-1]}", key)
    delete = _action(group, "delete", _delete(kind), f"delete a {kind[:-1]} (asks first; what it started stays)", key)
    delete.add_argument("--yes", action="store_true", help="do not ask before deleting")


def _flag(p: argparse.ArgumentParser, name: str, **kwargs: Any) -> None:
    p.add_argument(f"--{name.replace('_', '-')}", dest=name, **kwargs)


def _schedule_flags(p: argparse.ArgumentParser, *, create: bool) -> None:
    _flag(p, "workflow", required=create, metavar="W", help="the workflow each fire starts")
    _flag(
        p,
        "cron",
        required=create,
        metavar="EXPR",
        help="five fields with Quartz's L, W, LW, # and 5L, e.g. '0 3 * * *' or '59 23 LW * *'",
    )
    _flag(p, "timezone", metavar="ZONE", help="an IANA zone such as Europe/Paris (default UTC)")
    _flag(p, "missed_fire_policy", choices=("skip", "catch_up"), help="fires missed while no scheduler ran")
    _flag(p, "catch_up_limit", type=int, metavar="N", help="with catch_up: how many of the latest missed fires run")
    _flag(p, "params", metavar="JSON", help="each fire's params, a JSON object")
    if create:
        _flag(p, "enabled", action=argparse.BooleanOptionalAction, help="fire from now on (default: enabled)")


def _route_flags(p: argparse.ArgumentParser, *, create: bool) -> None:
    _flag(p, "workflow", required=create, metavar="W", help="the workflow a request starts, the body as its params")
    _flag(
        p,
        "sync_default",
        action=argparse.BooleanOptionalAction,
        help="answer with the output unless the caller passes ?wait=0",
    )
    _flag(p, "wait_seconds", type=float, metavar="S", help="how long a waiting request waits (0.1 to 600)")
    _flag(p, "rate_limit_per_minute", type=int, metavar="N", help="requests a minute for this route")
    _flag(p, "idempotency_ttl_seconds", type=int, metavar="S", help="how long an Idempotency-Key is remembered")
    _flag(p, "priority", type=int, metavar="N", help="-1000 to 1000, higher runs first")
    _flag(p, "description", metavar="TEXT", help="what calls it, for the next operator")
    if create:
        _flag(p, "enabled", action=argparse.BooleanOptionalAction, help="accept requests now (default: enabled)")


def _subscription_flags(p: argparse.ArgumentParser, *, create: bool) -> None:
    _flag(p, "pattern", required=create, metavar="GLOB", help="event types it matches, e.g. 'user.*'")
    _flag(p, "workflow", required=create, metavar="W", help="the workflow each matching event starts")
    _flag(p, "filters", metavar="JSON", help='payload fields that must be equal, e.g. \'{"plan": "pro"}\'')
    if create:
        _flag(p, "enabled", action=argparse.BooleanOptionalAction, help="start workflows now (default: enabled)")


def add_parsers(sub: Any) -> None:
    """`schedules`, `routes` and `subscriptions`, each with its actions, under the CLI's commands."""
    schedules = sub.add_parser(
        "schedules", help="cron schedules: list, show, create, edit, run, enable, disable, delete"
    ).add_subparsers(dest="action", required=True)
    _action(schedules, "list", schedules_list, "the schedules of the token's tenants, with their next fire")
    _action(schedules, "show", schedules_show, "a schedule and its next fires", "name")
    _schedule_flags(
        _action(
            schedules,
            "create",
            schedules_create,
            "create a schedule",
            "name",
            "Create schedule NAME (1 to 60 letters, digits, '_' or '-') in TENANT; it fires from "
            "now on. Every wrong field is named at once and nothing is created.",
        ),
        create=True,
    )
    schedules.choices["create"].add_argument("--tenant", required=True, metavar="T", help="a tenant you operate")
    _schedule_flags(_action(schedules, "edit", schedules_edit, "change a schedule's fields", "name"), create=False)
    _action(schedules, "run", schedules_run, "fire a schedule once now", "name")
    _switches(schedules, "schedules", "name")

    routes = sub.add_parser(
        "routes", help="signed HTTP routes: list, show, create, edit, enable, disable, delete"
    ).add_subparsers(dest="action", required=True)
    _action(routes, "list", routes_list, "the routes of the token's tenants")
    _action(routes, "show", routes_show, "a route, its settings and last deliveries", "name")
    _route_flags(
        _action(
            routes,
            "create",
            routes_create,
            "create a route",
            "name",
            "Create route NAME: a signed POST /api/routes/NAME with an ingress credential of TENANT "
            "then starts the workflow. Every wrong field is named at once and nothing is created.",
        ),
        create=True,
    )
    routes.choices["create"].add_argument("--tenant", required=True, metavar="T", help="a tenant you operate")
    _route_flags(_action(routes, "edit", routes_edit, "change a route's settings", "name"), create=False)
    _switches(routes, "routes", "name")

    subscriptions = sub.add_parser(
        "subscriptions", help="event subscriptions: list, show, create, edit, enable, disable, delete"
    ).add_subparsers(dest="action", required=True)
    _action(subscriptions, "list", subscriptions_list, "the subscriptions the token sees")
    _action(subscriptions, "show", subscriptions_show, "a subscription and the events it started", "id")
    create = _action(
        subscriptions,
        "create",
        subscriptions_create,
        "create a subscription",
        description="Events of TENANT (or of every tenant with --tenant '', staff only) whose type "
        "matches --pattern start --workflow. Every wrong field is named at once.",
    )
    create.add_argument("--tenant", required=True, metavar="T", help="a tenant you operate, or '' for every tenant")
    _subscription_flags(create, create=True)
    _subscription_flags(_action(subscriptions, "edit", subscriptions_edit, "change a subscription", "id"), create=False)
    _switches(subscriptions, "subscriptions", "id")
