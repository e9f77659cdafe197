"""HTTP routes defined by operators: create, edit, enable or disable, delete. Every field is
checked before any row changes, and every wrong field is reported at once (`route_problems`,
pure), so a form or an API answer shows each message on its field in one answer; the console,
the REST API and the CLI all call these. `route_upsert` (ingress.py) stays for routes in code."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from ingest.triggers.errors import InvalidRoute, RouteExists, RouteNotFound
from ingest.triggers.field_checks import (
    UNSET,
    tenant_problem,
    whole_between,
    wholes,
    workflow_problem,
)
from ingest.triggers.models import Route

_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")
NAME_PATTERN = _NAME.pattern
# Names that are the console's own addresses (/routes/new/), not a route's page.
RESERVED_NAMES = frozenset({"new"})
WHOLE = ("rate_limit_per_minute", "idempotency_ttl_seconds", "priority")
EDITABLE = (
    "workflow",
    "enabled",
    "sync_default",
    "wait_seconds",
    "rate_limit_per_minute",
    "idempotency_ttl_seconds",
    "priority",
    "description",
)
WAIT_MIN = 0.1
WAIT_MAX = 600.0
TTL_MIN = 60
TTL_MAX = 30 * 24 * 3600
RATE_MAX = 1_000_000
PRIORITY_MAX = 1000
DESCRIPTION_MAX = 2000


def _between(value: Any, low: float, high: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high


def route_name_problem(name: Any) -> str | None:
    """What is wrong with `name` as a new route's name (its form, not whether it is taken), or None."""
    if not isinstance(name, str) or not _NAME.match(name):
        return (
            f"route name {str(name)[:120]!r} is invalid; use 1 to 100 letters, digits, '_' or "
            "'-' (it is the URL: POST /api/routes/<name>)"
        )
    if name in RESERVED_NAMES:
        return f"{name!r} is the address of the console's new-route form; pick another name"
    return None


def _flag(fields: dict[str, Any], key: str, problems: dict[str, str]) -> None:
    if key in fields and not isinstance(fields[key], bool):
        problems[key] = "true or false"


def route_problems(fields: dict[str, Any], *, name: Any = UNSET, tenant: Any = UNSET) -> dict[str, str]:
    """What is wrong with a route's fields, by field name (empty when nothing is). Pure, except
    that a workflow must be registered in this process. `name` and `tenant` are checked when given."""
    problems: dict[str, str] = {}
    for key, problem in (
        ("name", route_name_problem(name) if name is not UNSET else None),
        ("tenant", tenant_problem(tenant) if tenant is not UNSET else None),
        ("workflow", workflow_problem(fields["workflow"]) if "workflow" in fields else None),
    ):
        if problem:
            problems[key] = problem
    _flag(fields, "enabled", problems)
    _flag(fields, "sync_default", problems)
    if "wait_seconds" in fields and not _between(fields["wait_seconds"], WAIT_MIN, WAIT_MAX):
        problems["wait_seconds"] = f"a sync wait is {WAIT_MIN:g} to {WAIT_MAX:g} seconds"
    rate = fields.get("rate_limit_per_minute")
    if rate is not None and not whole_between(rate, 1, RATE_MAX):
        problems["rate_limit_per_minute"] = f"a rate limit is 1 to {RATE_MAX} requests a minute, or empty for none"
    if not whole_between(fields.get("idempotency_ttl_seconds", TTL_MIN), TTL_MIN, TTL_MAX):
        problems["idempotency_ttl_seconds"] = f"idempotency keys live {TTL_MIN} to {TTL_MAX} seconds (30 days)"
    if not whole_between(fields.get("priority", 0), -PRIORITY_MAX, PRIORITY_MAX):
        problems["priority"] = f"a priority is a whole number from -{PRIORITY_MAX} to {PRIORITY_MAX}"
    description = fields.get("description", "")
    if not isinstance(description, str) or len(description) > DESCRIPTION_MAX:
        problems["description"] = f"a description is text of at most {DESCRIPTION_MAX} characters"
    unknown = set(fields) - set(EDITABLE)
    if unknown:
        problems["__all__"] = f"route fields {sorted(unknown)} are unknown; use {list(EDITABLE)}"
    return problems


def route_create(*, name: Any, tenant: Any, **fields: Any) -> Route:
    """A new route; InvalidRoute (with every problem) when a field is wrong, RouteExists when the
    name is taken and nothing else is wrong."""
    problems = route_problems(fields, name=name, tenant=tenant)
    if "name" not in problems and Route.objects.filter(name=name).exists():
        taken = f"a route is already named {name!r}; pick another name"
        if not problems:
            raise RouteExists(problems={"name": taken})
        problems["name"] = taken
    if problems:
        raise InvalidRoute(problems=problems)
    return Route.objects.create(name=name, tenant=tenant, **wholes(fields, WHOLE))


def route_update(*, name: str, **fields: Any) -> Route:
    """Change a route's settings (not its name or tenant); nothing changes on InvalidRoute."""
    problems = route_problems(fields)
    if problems:
        raise InvalidRoute(problems=problems)
    with transaction.atomic():
        route = Route.objects.select_for_update().filter(name=name).first()
        if route is None:
            raise RouteNotFound(f"no route is named {name[:100]!r}")
        for key, value in wholes(fields, WHOLE).items():
            setattr(route, key, value)
        route.save()  # moves updated_at: a request checked against the old row is refused
    return route


def route_set_enabled(*, name: str, enabled: bool) -> Route:
    """Enable or disable a route: a disabled route answers 409 `route_disabled` and starts nothing."""
    return route_update(name=name, enabled=enabled)


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
