"""The shapes of the `step` a workflow's `run` receives, for workflow authors to type against:
`def run(self, event: WorkflowEvent, step: StepApi)`, or `AsyncStepApi` for `async def run`.

The engine's own classes (`runtime/steps.py`) are held to these by mypy, so a method added to
one and not the other, or a signature that drifts, fails the type check rather than a workflow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from ingest.engine.runtime.parallel import Settled, StepCall


class StepApi(Protocol):
    """The step of a synchronous workflow (docs/engine-contract.md)."""

    @property
    def version(self) -> int: ...

    def version_at_least(self, version: int) -> bool: ...

    def call(self, name: str, fn: Callable[..., Any], **options: Any) -> StepCall: ...

    def do(self, name: str, fn: Callable[..., Any], **options: Any) -> Any: ...

    def all_settled(self, calls: Sequence[StepCall], *, concurrency: int | None = None) -> list[Settled]: ...

    def all(self, calls: Sequence[StepCall], *, concurrency: int | None = None) -> list[Any]: ...

    def sleep(self, name: str, duration: Any) -> None: ...

    def sleep_until(self, name: str, when: datetime | str | float | int) -> None: ...

    def wait_for_event(self, name: str, *, type: str, timeout: Any = ...) -> dict[str, Any]: ...

    def wait_for_approval(
        self,
        name: str,
        *,
        title: str,
        fields: list[dict[str, Any]] | None = ...,
        timeout: Any = ...,
        description: str = ...,
        context: dict[str, Any] | None = ...,
        escalation: str = ...,
    ) -> dict[str, Any]: ...

    def set_search_attributes(self, **values: Any) -> dict[str, str]: ...

    def child(self, name: str, *, workflow: str, params: dict[str, Any] | None = ..., id: str | None = ...) -> Any: ...

    def fan_out(
        self,
        name: str,
        handler: Any,
        items: Sequence[Any],
        *,
        batch_size: int = ...,
        timeout: Any = ...,
        retries: dict[str, Any] | None = ...,
        item_timeout: Any = ...,
        pack: int = ...,
    ) -> list[Settled]: ...

    def poll(
        self,
        name: str,
        check: Callable[..., Any],
        *,
        until: Callable[[Any], Any] | None = ...,
        initial: Any = ...,
        factor: float = ...,
        max_interval: Any = ...,
        deadline: Any = ...,
        retries: dict[str, Any] | None = ...,
        timeout: Any = ...,
    ) -> Any: ...


# Kept as a mirror of StepApi on purpose: a Protocol is what authors read and their editors show, so each
# awaited method spells out its parameters here rather than being derived from the sync one.
class AsyncStepApi(Protocol):
    """The step of an `async def run` workflow: the same methods as `StepApi`, awaited."""

    @property
    def version(self) -> int: ...

    def version_at_least(self, version: int) -> bool: ...

    def call(self, name: str, fn: Callable[..., Any], **options: Any) -> StepCall: ...

    async def do(self, name: str, fn: Callable[..., Any], **options: Any) -> Any: ...

    async def all_settled(self, calls: Sequence[StepCall], *, concurrency: int | None = None) -> list[Settled]: ...

    async def all(self, calls: Sequence[StepCall], *, concurrency: int | None = None) -> list[Any]: ...

    async def sleep(self, name: str, duration: Any) -> None: ...

    async def sleep_until(self, name: str, when: datetime | str | float | int) -> None: ...

    async def wait_for_event(self, name: str, *, type: str, timeout: Any = ...) -> dict[str, Any]: ...

    async def wait_for_approval(
        self,
        name: str,
        *,
        title: str,
        fields: list[dict[str, Any]] | None = ...,
        timeout: Any = ...,
        description: str = ...,
        context: dict[str, Any] | None = ...,
        escalation: str = ...,
    ) -> dict[str, Any]: ...

    async def set_search_attributes(self, **values: Any) -> dict[str, str]: ...

    async def child(
        self, name: str, *, workflow: str, params: dict[str, Any] | None = ..., id: str | None = ...
    ) -> Any: ...

    async def fan_out(
        self,
        name: str,
        handler: Any,
        items: Sequence[Any],
        *,
        batch_size: int = ...,
        timeout: Any = ...,
        retries: dict[str, Any] | None = ...,
        item_timeout: Any = ...,
        pack: int = ...,
    ) -> list[Settled]: ...

    async def poll(
        self,
        name: str,
        check: Callable[..., Any],
        *,
        until: Callable[[Any], Any] | None = ...,
        initial: Any = ...,
        factor: float = ...,
        max_interval: Any = ...,
        deadline: Any = ...,
        retries: dict[str, Any] | None = ...,
        timeout: Any = ...,
    ) -> Any: ...
