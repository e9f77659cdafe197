"""HTTP routes defined by operators: create, edit, delete. Every field is checked before any
row changes, and every wrong field is reported at once (`route_problems`, pure), so a form shows
each message on its field in one answer. `route_upsert` (ingress.py) stays for routes in code."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from ingest.engine import workflow_names
from ingest.triggers.errors import InvalidRoute, RouteNotFound
from ingest.triggers.models import Route

_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")
EDITABLE = ("workflow", "enabled", "sync_default", "wait_seconds", "rate_limit_per_minute",
            "idempotency_ttl_seconds", "priority", "description")
WAIT_MAX = 600.0
TTL_MAX = 30 * 24 * 3600
RATE_MAX = 1_000_000
PRIORITY_MAX = 1000


def _between(value: Any, low: float, high: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high


def route_problems(fields: dict[str, Any], *, name: str | None = None) -> dict[str, str]:
    """What is wrong with a route's fields, by field name (empty when nothing is). Pure, except
    that a workflow must be registered in this process. `name` is checked when given."""
    problems: dict[str, str] = {}
    if name is not None and not _NAME.match(name):
        problems["name"] = (f"route name {name[:120]!r} is invalid; use 1 to 100 letters, digits, '_' or "
                            "'-' (it is the URL: POST /api/routes/<name>)")
    if "workflow" in fields and fields["workflow"] not in workflow_names():
        problems["workflow"] = (f"no workflow is registered as {str(fields['workflow'])[:120]!r}; use one of "
                                f"{', '.join(workflow_names())}")
    if "wait_seconds" in fields and not _between(fields["wait_seconds"], 0.1, WAIT_MAX):
        problems["wait_seconds"] = f"a sync wait is 0.1 to {WAIT_MAX:g} seconds"
    rate = fields.get("rate_limit_per_minute")
    if rate is not None and not (isinstance(rate, int) and _between(rate, 1, RATE_MAX)):
        problems["rate_limit_per_minute"] = f"a rate limit is 1 to {RATE_MAX} requests a minute, or empty for none"
    ttl = fields.get("idempotency_ttl_seconds", 3600)
    if not (isinstance(ttl, int) and _between(ttl, 60, TTL_MAX)):
        problems["idempotency_ttl_seconds"] = f"idempotency keys live 60 to {TTL_MAX} seconds (30 days)"
    priority = fields.get("priority", 0)
    if not (isinstance(priority, int) and _between(priority, -PRIORITY_MAX, PRIORITY_MAX)):
        problems["priority"] = f"a priority is a whole number from -{PRIORITY_MAX} to {PRIORITY_MAX}"
    if len(str(fields.get("description", ""))) > 2000:
        problems["description"] = "a description is at most 2000 characters"
    unknown = set(fields) - set(EDITABLE)
    if unknown:
        problems["__all__"] = f"route fields {sorted(unknown)} are unknown; use {list(EDITABLE)}"
    return problems


def route_create(*, name: str, tenant: str, **fields: Any) -> Route:
    """A new route; InvalidRoute (with every problem) when a field is wrong or the name is taken."""
    problems = route_problems(fields, name=name)
    if not tenant or len(tenant) > 100:
        problems["tenant"] = "a route runs its workflow in one tenant; name it"
    if "name" not in problems and Route.objects.filter(name=name).exists():
        problems["name"] = f"a route is already named {name!r}; pick another name"
    if problems:
        raise InvalidRoute(problems=problems)
    return Route.objects.create(name=name, tenant=tenant, **fields)


def route_update(*, name: str, **fields: Any) -> Route:
    """Change a route's settings (not its name or tenant); nothing changes on InvalidRoute."""
    problems = route_problems(fields)
    if problems:
        raise InvalidRoute(problems=problems)
    with transaction.atomic():
        route = Route.objects.select_for_update().filter(name=name).first()
        if route is None:
            raise RouteNotFound(f"no route is named {name[:100]!r}")
        for key, value in fields.items():
            setattr(route, key, value)
        route.save()  # moves updated_at: a request checked against the old row is refused
    return route


def route_delete(*, name: str) -> Route:
    """Delete a route: POST /api/routes/<name> answers 404 from now on. The instances it started
    and their history stay."""
    with transaction.atomic():
        route = Route.objects.select_for_update().filter(name=name).first()
        if route is None:
            raise RouteNotFound(f"no route is named {name[:100]!r}")
        gone = Route(pk=route.pk, name=route.name, workflow=route.workflow, tenant=route.tenant)
        route.delete()
    return gone
