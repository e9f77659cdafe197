"""The Workflow base class, its event, and the registry of workflows by name."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from ingest.engine.errors import UnknownWorkflow

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,199}$")


@dataclass(frozen=True)
class WorkflowEvent:
    """What `run` receives: the params as `payload`, the instance id and when it was created."""

    payload: dict[str, Any]
    instance_id: str
    timestamp: datetime
    tenant: str = "default"
    workflow: str = ""
    schedule: dict[str, Any] | None = field(default=None)


class Workflow:
    """Subclass with a `name` and a `run(event, step)` method (sync or async) to register it.

    Optional class attributes for flow control: `concurrency` (max running instances of this
    workflow), `concurrency_key` (a params key whose value partitions that limit, e.g.
    "tenant"), `priority` (default for new instances).
    """

    name: ClassVar[str] = ""
    concurrency: ClassVar[int | None] = None
    concurrency_key: ClassVar[str | None] = None
    priority: ClassVar[int] = 0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            register(cls)

    def run(self, event: WorkflowEvent, step: Any) -> Any:
        raise NotImplementedError(f"workflow {self.name!r} must define run(event, step)")

    @classmethod
    def is_async(cls) -> bool:
        return inspect.iscoroutinefunction(cls.run)


_registry: dict[str, type[Workflow]] = {}


def register(cls: type[Workflow]) -> type[Workflow]:
    if not NAME_PATTERN.match(cls.name):
        raise ValueError(
            f"workflow name {cls.name!r} must be lowercase letters, digits, '.', '_' or '-' "
            "(e.g. 'gong-ingest'), at most 200 characters"
        )
    _registry[cls.name] = cls
    return cls


def get_workflow(name: str) -> type[Workflow]:
    try:
        return _registry[name]
    except KeyError:
        known = ", ".join(sorted(_registry)) or "none"
        raise UnknownWorkflow(
            f"no workflow is registered as {name!r}; registered workflows: {known}"
        ) from None


def workflow_names() -> list[str]:
    return sorted(_registry)
