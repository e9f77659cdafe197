"""The checks the triggers' fields share (schedules, routes, subscriptions, ingress credentials):
the workflow a trigger starts (any registered one but those the engine and the alerts run for
themselves), the tenant its instances run in, and whole numbers as JSON sends them. One check,
so the console's choices, the API's answers and the CLI's refusals agree. Pure, except that the
workflow must be registered in this process."""

from __future__ import annotations

from typing import Any

from ingest.engine import workflow_names

# Workflows the engine runs for itself (alert delivery, callbacks, batches, on_error hooks), not
# ones a trigger should start.
INTERNAL = frozenset({"alert-deliver", "callback-deliver", "runledger-batch", "runledger.on-error"})


def startable_workflows() -> list[str]:
    """The registered workflows a trigger may start, sorted."""
    return [w for w in workflow_names() if w not in INTERNAL]


def workflow_problem(value: Any) -> str | None:
    """What is wrong with `value` as the workflow a trigger starts, or None."""
    startable = startable_workflows()
    if isinstance(value, str) and value in startable:
        return None
    return f"no workflow a trigger may start is named {str(value)[:120]!r}; use one of {', '.join(startable)}"


TENANT_MAX = 100


class _Unset:
    """A field not given to a check (None is a value: JSON's null)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def tenant_problem(tenant: Any) -> str | None:
    """What is wrong with `tenant` as the tenant a trigger runs its workflow in, or None."""
    if isinstance(tenant, str) and 0 < len(tenant) <= TENANT_MAX and tenant.strip() == tenant:
        return None
    return f"name the tenant its instances run in: 1 to {TENANT_MAX} characters, no surrounding spaces"


def whole(value: Any) -> int | None:
    """`value` as a whole number when it is one (5, or 5.0 as JSON Schema's `integer` reads it;
    never true or false), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def whole_between(value: Any, low: int, high: int) -> bool:
    number = whole(value)
    return number is not None and low <= number <= high


def wholes(fields: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """`fields` with each of `names` that is a whole number as an int (5.0 stored as 5)."""
    return {k: (whole(v) if k in names and whole(v) is not None else v) for k, v in fields.items()}
