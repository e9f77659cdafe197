"""The Workflow base class, its event, and the registry of workflows by name."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

from ingest.engine.durations import Duration, parse_duration
from ingest.engine.errors import DuplicateWorkflow, UnknownWorkflow

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
    version: int = 1  # the workflow version the instance started on (docs/engine-contract.md, "Versions")


class Workflow:
    """Subclass with a `name` and a `run(event, step)` method (sync or async) to register it.

    Optional class attributes for flow control (docs/flow-control.md): `concurrency` (max
    instances of this workflow running a turn at once), `concurrency_key` (a params key whose
    value partitions that limit, e.g. "tenant"), `priority` (default for new instances, higher
    first), `timeout` (a duration from the instance's start after which it errors with
    WorkflowTimeout), `rate_limit` (`{"limit": 100, "period": "1 minute", "key": "tenant"}`:
    at most `limit` starts per sliding `period`, per key value), `concurrency_overrides`
    (`{"acme": 8}`: the cap of those key values, in place of `concurrency`; a row of the
    engine's concurrency limits table, set from the console or the API, wins over both).
    `retention_days` (default 30):
    finished instances older than that are archived and purged (ingest.engine.services.retention).

    `version` (default 1): bump it when a change moves, renames, adds or removes steps, and
    guard the new path with `step.version_at_least(n)`. Each instance records the version it
    started on and replays on that version's path; docs/engine-contract.md, "Versions".

    `on_error(self, ctx, failure)` (optional): run as a durable step of an instance of its own
    when an instance errors or is terminated (ingest/engine/hooks.py); `on_error_retries` and
    `on_error_timeout` configure that step as `step.do`'s `retries` and `timeout`.

    `sensitive_params` (e.g. `("password",)`): those params are encrypted at rest, shown as
    "redacted" in every list, page and answer, and kept out of the search index; `run` sees them
    in clear (docs/secrets.md).
    """

    name: ClassVar[str] = ""
    concurrency: ClassVar[int | None] = None
    concurrency_key: ClassVar[str | None] = None
    concurrency_overrides: ClassVar[Mapping[str, int]] = {}
    priority: ClassVar[int] = 0
    timeout: ClassVar[Duration | None] = None
    rate_limit: ClassVar[dict[str, Any] | None] = None
    retention_days: ClassVar[int] = 30
    sensitive_params: ClassVar[tuple[str, ...]] = ()
    version: ClassVar[int] = 1

    on_error_retries: ClassVar[dict[str, Any] | None] = None
    on_error_timeout: ClassVar[Duration | None] = None
    # Parsed once at class creation, so a bad value fails at import, not in the claim loop.
    _timeout: ClassVar[timedelta | None] = None
    _rate: ClassVar[tuple[int, timedelta] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _check_flow(cls)
        if cls.__dict__.get("name"):
            register(cls)

    def run(self, event: WorkflowEvent, step: Any) -> Any:
        raise NotImplementedError(f"workflow {self.name!r} must define run(event, step)")

    @classmethod
    def is_async(cls) -> bool:
        return inspect.iscoroutinefunction(cls.run)


def _check_flow(cls: type[Workflow]) -> None:
    label = cls.__dict__.get("name") or cls.__name__
    version = cls.version
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"version of workflow {label!r} must be a whole number of at least 1; got {version!r}")
    days = cls.retention_days
    if not isinstance(days, int) or isinstance(days, bool) or days < 1:
        raise ValueError(
            f"retention_days of workflow {label!r} must be a whole number of days of at least 1; got {days!r}"
        )
    limit = cls.concurrency
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"concurrency of workflow {label!r} must be a whole number ≥ 1; got {limit!r}")
    _check_overrides(cls, label)
    cls._timeout = None if cls.timeout is None else parse_duration(cls.timeout, what=f"timeout of workflow {label!r}")
    cls._rate = None
    rate = cls.rate_limit
    if rate is None:
        return
    if not isinstance(rate, dict) or set(rate) - {"limit", "period", "key"} or not {"limit", "period"} <= set(rate):
        raise ValueError(
            f"rate_limit of workflow {label!r} must be a dict with 'limit', 'period' and an "
            f"optional 'key', e.g. {{'limit': 100, 'period': '1 minute', 'key': 'tenant'}}; got {rate!r}"
        )
    count = rate["limit"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"rate_limit.limit of workflow {label!r} must be a whole number ≥ 1; got {count!r}")
    period = parse_duration(rate["period"], what=f"rate_limit.period of workflow {label!r}")
    if period <= timedelta(0):
        raise ValueError(f"rate_limit.period of workflow {label!r} must be longer than zero")
    key = rate.get("key")
    # Instances carry one partition key (`concurrency_key`); the claim locks and counts per
    # (workflow, key), so a rate keyed differently from the concurrency limit could not be
    # counted race-free under one lock.
    if key is not None and cls.concurrency_key is None:
        cls.concurrency_key = key
    elif key != cls.concurrency_key:
        raise ValueError(
            f"rate_limit.key of workflow {label!r} is {key!r} but its concurrency_key is "
            f"{cls.concurrency_key!r}; both limits partition by the same key — set them equal"
        )
    cls._rate = (count, period)


def _check_overrides(cls: type[Workflow], label: str) -> None:
    overrides = cls.concurrency_overrides
    if not overrides:
        return
    if not isinstance(overrides, Mapping):
        raise ValueError(
            f"concurrency_overrides of workflow {label!r} must map key values to caps, "
            f"e.g. {{'acme': 8}}; got {overrides!r}"
        )
    for key, cap in overrides.items():
        if not isinstance(key, str) or isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ValueError(
                f"concurrency_overrides of workflow {label!r}: {key!r} maps to {cap!r}; "
                "each key value's cap is a whole number ≥ 1"
            )
    # The rate limit may set concurrency_key below; an override needs one now or from it.
    if cls.concurrency_key is None and not (cls.rate_limit or {}).get("key"):
        raise ValueError(
            f"concurrency_overrides of workflow {label!r} cap key values, but the workflow "
            "declares no concurrency_key to partition its instances by"
        )


_registry: dict[str, type[Workflow]] = {}


def register(cls: type[Workflow]) -> type[Workflow]:
    if not NAME_PATTERN.match(cls.name):
        raise ValueError(
            f"workflow name {cls.name!r} must be lowercase letters, digits, '.', '_' or '-' "
            "(e.g. 'gong-ingest'), at most 200 characters"
        )
    known = _registry.get(cls.name)
    if known is not None and _where(known) != _where(cls):
        # Last-one-wins would silently run one class's code for the other's instances.
        raise DuplicateWorkflow(
            f"workflow name {cls.name!r} is already registered by {_where(known)}, so {_where(cls)} "
            "cannot take it too: instances find their code by this name — give one of them another name"
        )
    _registry[cls.name] = cls  # the same class again (a module reloaded): its newest definition
    return cls


def _where(cls: type[Workflow]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def get_workflow(name: str) -> type[Workflow]:
    try:
        return _registry[name]
    except KeyError:
        known = ", ".join(sorted(_registry)) or "none"
        raise UnknownWorkflow(f"no workflow is registered as {name!r}; registered workflows: {known}") from None


def registered_workflows() -> list[type[Workflow]]:
    return list(_registry.values())


def workflow_names() -> list[str]:
    return sorted(_registry)
