"""Fan-out item handlers: plain functions registered by name, so any worker can run an item.

    @fan_out_handler("classify-url")
    def classify_url(ctx, item):            # ctx as in step.do: attempt, idempotency_key, costs
        return {"url": item, "label": ...}

Registering a handler registers the workflow its items run as, `fan-out.<name>`: one instance
per item whose only step, named after the handler, calls `handler(ctx, item)` with the retries
and timeout the fan-out asked for. So an item has what every instance has — a lease, attempts,
cost rows, a dead letter when its retries are exhausted — and any worker that imported the
handler's module (RUNLEDGER_WORKFLOW_MODULES) can run it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from ingest.engine.errors import InvalidStepConfig, UnknownWorkflow
from ingest.engine.workflow import NAME_PATTERN, Workflow, WorkflowEvent, get_workflow

PREFIX = "fan-out."
F = TypeVar("F", bound=Callable[..., Any])

_handlers: dict[str, Callable[..., Any]] = {}
_names: dict[int, str] = {}  # id(function) -> its name; functions live as long as their module


class ItemWorkflow(Workflow):
    """The workflow a function handler's items run as (one subclass per handler)."""

    handler: ClassVar[str] = ""

    def run(self, event: WorkflowEvent, step: Any) -> Any:
        handler = _handlers[self.handler]
        item = event.payload.get("item")
        options = {k: event.payload[k] for k in ("retries", "timeout") if event.payload.get(k) is not None}
        return step.do(self.handler, lambda ctx: handler(ctx, item), **options)


def fan_out_handler(name: str) -> Callable[[F], F]:
    """Register `fn(ctx, item)` as the fan-out handler `name` (lowercase, like workflow names)."""
    if not isinstance(name, str) or not NAME_PATTERN.match(PREFIX + name):
        raise InvalidStepConfig(
            f"fan-out handler name {name!r} must be lowercase letters, digits, '.', '_' "
            "or '-' (e.g. 'classify-url'), at most 190 characters"
        )

    def register(fn: F) -> F:
        if not callable(fn):
            raise InvalidStepConfig(f"fan-out handler {name!r} must be a function fn(ctx, item)")
        _handlers[name] = fn
        _names[id(fn)] = name
        type(
            f"FanOutItem[{name}]",
            (ItemWorkflow,),
            {"name": PREFIX + name, "handler": name, "__module__": getattr(fn, "__module__", __name__)},
        )
        return fn

    return register


@dataclass(frozen=True)
class Target:
    """What runs a fan-out's items: a registered function, or a workflow (items as its params)."""

    kind: Literal["function", "workflow"]
    name: str  # the handler's name, or the workflow's
    workflow: str  # the workflow of the items' instances

    @property
    def is_function(self) -> bool:
        return self.kind == "function"


def resolve_handler(handler: Any, *, step: str) -> Target:
    """The fan-out target `handler` names: a registered function (or its name), a registered
    Workflow subclass (or its name)."""
    if isinstance(handler, type) and issubclass(handler, Workflow):
        if not handler.name or handler.name.startswith(PREFIX):
            raise InvalidStepConfig(
                f"fan-out {step!r}: workflow {handler.__name__} has no name; only registered workflows can run items"
            )
        return Target("workflow", handler.name, handler.name)
    if isinstance(handler, str):
        if handler in _handlers:
            return Target("function", handler, PREFIX + handler)
        try:
            get_workflow(handler)
        except UnknownWorkflow:
            known = ", ".join(sorted(_handlers)) or "none"
            raise InvalidStepConfig(
                f"fan-out {step!r}: no handler or workflow is registered as {handler!r} (handlers: {known})"
            ) from None
        return Target("workflow", handler, handler)
    if callable(handler):
        name = _names.get(id(handler))
        if name is None or _handlers.get(name) is not handler:
            label = getattr(handler, "__qualname__", repr(handler))
            raise InvalidStepConfig(
                f"fan-out {step!r}: {label} is not a registered handler; decorate it with "
                '@fan_out_handler("its-name") in a module every worker imports, so any worker can '
                "run its items"
            )
        return Target("function", name, PREFIX + name)
    raise InvalidStepConfig(
        f"fan-out {step!r}: handler must be a function registered with @fan_out_handler, "
        f"a Workflow subclass, or the name of either; got {handler!r}"
    )


def handler_function(name: str) -> Callable[..., Any]:
    """The function registered as the fan-out handler `name`."""
    return _handlers[name]


def handler_names() -> list[str]:
    return sorted(_handlers)
