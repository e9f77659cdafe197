"""A packed fan-out's carrier: one instance that runs several items, each item as steps of it.

`step.fan_out(..., pack=K)` inserts one carrier instance per K items (store_fan_out.fill)
instead of one instance per item. A carrier is an instance of the items' own workflow
(`fan-out.<handler>`, or the target workflow), so its cost rows, concurrency limits, version
and dead letters are that workflow's; its params hold the items and `_pack`, which makes the
turn run `run_pack` here instead of the workflow's `run`:

- a function handler's item is one step of the carrier, `item-<index>.<handler>`, with the
  fan-out's retries and item_timeout: its attempts, cost rows and result are that step's. An item
  waiting for a retry does not hold up its siblings: the carrier runs them, then sleeps until the
  earliest retry (each item is always exactly one step, so replay positions stay put);
- a workflow item runs the workflow's `run` with its steps named `item-<index>.<step>`, one item
  after the other (a sleeping item holds up the items after it in its carrier: their steps must
  come after its in the replay order).

An item that fails for good is errored on its own: its siblings go on. When the carrier has run
every item it ends in one transaction that counts all of them into the aggregate
(fan_out_items.pack_landed), once: complete when every item completed, else errored with a dead
letter naming the first failed item's step, so an operator's redrive (instance_retry) runs the
failed items again and nothing else. Before each item the carrier checks its fan-out is still
wanted (its parent not terminated nor restarted from before it) and stops otherwise, its
remaining items terminated.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ingest.engine.errors import FanOutItemFailed, InvalidParams
from ingest.engine.models import FanOut, FanOutItemState, Status
from ingest.engine.results import WorkflowResult
from ingest.engine.runtime.failures import failure_of
from ingest.engine.runtime.outcomes import Suspend, check_result
from ingest.engine.runtime.parallel import StepCall, earliest
from ingest.engine.runtime.records import Failure
from ingest.engine.workflow import Workflow, WorkflowEvent

PACK_KEY = "_pack"
ITEMS_KEY = "items"
MAX_PACK = 1_000
RECHECK_S = 1.0  # how often a carrier looks again whether its fan-out is still waited for
_CARRIER_ID = re.compile(r"^_fo(\d+)-(\d+)-(\d+)$")


def carrier_id(fan_out_id: int, first: int, last: int) -> str:
    """A carrier's id names its fan-out and the indexes of its items (first and last, inclusive)."""
    return f"_fo{fan_out_id}-{first}-{last}"


def carrier_span(instance_id: str) -> tuple[int, int, int] | None:
    """(fan-out id, first index, last index) of a carrier's id; None for any other id."""
    m = _CARRIER_ID.match(instance_id)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def carrier_params(*, fan_out_id: int, first: int, items: list[Any], options: dict[str, Any]) -> dict[str, Any]:
    return {PACK_KEY: {"fan_out": fan_out_id, "first": first, **options}, ITEMS_KEY: items}


def is_carrier(params: Any) -> bool:
    return isinstance(params, dict) and isinstance(params.get(PACK_KEY), dict)


def item_step_name(index: int, name: str) -> str:
    return f"item-{index}.{name}"


@dataclass(frozen=True)
class ItemOutcome:
    """One item's end as its carrier saw it."""

    index: int
    state: str  # a FanOutItemState: complete, errored or terminated
    result: Any = None
    failure: Failure | None = None


@dataclass(frozen=True)
class PackOutcome:
    """What `run_pack` returns to the turn: every item's outcome, and the step a dead letter names."""

    items: list[ItemOutcome]
    failed_step: str = ""
    stopped: bool = False  # the fan-out was no longer waited for: the items not run are terminated

    @property
    def failed(self) -> list[ItemOutcome]:
        return [o for o in self.items if o.state == FanOutItemState.ERRORED]

    def summary(self) -> dict[str, Any]:
        """The carrier's output: counts only (the results are the items' rows and steps)."""
        return {
            "items": len(self.items),
            "complete": sum(o.state == FanOutItemState.COMPLETE for o in self.items),
            "failed": len(self.failed),
            "terminated": sum(o.state == FanOutItemState.TERMINATED for o in self.items),
        }

    def error(self) -> FanOutItemFailed:
        first = self.failed[0]
        assert first.failure is not None
        return FanOutItemFailed(
            f"{len(self.failed)} of {len(self.items)} items of this carrier failed; the first, item "
            f"{first.index}: {first.failure.name}: {first.failure.message[:500]} — retry the carrier to run "
            "its failed items again"
        )


def run_pack(
    workflow: Workflow, event: WorkflowEvent, step: Any, *, handler: Callable[..., Any] | None, handler_name: str
) -> PackOutcome:
    """Run a carrier's items (this module's docstring); `handler` for a function handler's items."""
    spec = event.payload[PACK_KEY]
    items = event.payload.get(ITEMS_KEY)
    first = spec.get("first")
    fan_out_id = spec.get("fan_out")
    if not isinstance(items, list) or not isinstance(first, int) or not isinstance(fan_out_id, int):
        raise InvalidParams(f"instance {event.instance_id}: a fan-out carrier's params need items, first and fan_out")
    options = {k: spec[k] for k in ("retries", "timeout") if spec.get(k) is not None}
    watch = _Watch(fan_out_id)
    outcomes: list[ItemOutcome] = []
    suspends: list[Suspend] = []
    failed_step = ""
    for offset, item in enumerate(items):
        index = first + offset
        if not watch.waited_for():
            rest = [ItemOutcome(first + i, FanOutItemState.TERMINATED) for i in range(offset, len(items))]
            return PackOutcome(outcomes + rest, failed_step=failed_step, stopped=True)
        if handler is not None:
            name = item_step_name(index, handler_name)
            try:
                value = step.do(name, lambda ctx, item=item: handler(ctx, item), **options)
            except Suspend as suspend:  # a retry's delay: the siblings go on meanwhile
                suspends.append(suspend)
                continue
            except Exception as exc:  # noqa: BLE001 - the item's failure, not the carrier's
                outcomes.append(ItemOutcome(index, FanOutItemState.ERRORED, failure=failure_of(exc)))
                failed_step = failed_step or name
                continue
        else:
            scoped = ItemStep(step, index)
            try:
                value = _item_output(workflow, event, item, scoped, index)
            except Exception as exc:  # noqa: BLE001 - the item's failure, not the carrier's
                outcomes.append(ItemOutcome(index, FanOutItemState.ERRORED, failure=failure_of(exc)))
                failed_step = failed_step or scoped.last or f"item-{index}"
                continue
        outcomes.append(ItemOutcome(index, FanOutItemState.COMPLETE, result=value))
    if suspends:
        raise earliest(suspends)
    return PackOutcome(outcomes, failed_step=failed_step)


def _item_output(workflow: Workflow, event: WorkflowEvent, item: Any, step: ItemStep, index: int) -> Any:
    if not isinstance(item, dict):
        raise InvalidParams(f"item {index} must be a dict, the params of a {event.workflow!r} run")
    item_event = WorkflowEvent(
        payload=item,
        instance_id=event.instance_id,
        timestamp=event.timestamp,
        tenant=event.tenant,
        workflow=event.workflow,
        version=event.version,
    )
    output = workflow.run(item_event, step)
    if isinstance(output, WorkflowResult):
        output = output.as_output(duration_ms=None)
    return check_result(f"item-{index}", event.instance_id, output)


class _Watch:
    """Whether the carrier's fan-out is still wanted, asked at most every RECHECK_S: not when its
    parent was terminated, nor restarted from before it (the fan-out's row went with its step).
    A fan-out that timed out or completed still runs its carriers, as it runs its items'
    instances: their outcomes are no longer counted, but a redriven item does its work."""

    def __init__(self, fan_out_id: int) -> None:
        self.fan_out_id = fan_out_id
        self.checked_at: float | None = None
        self.answer = True

    def waited_for(self) -> bool:
        now = time.monotonic()
        if self.checked_at is None or now - self.checked_at >= RECHECK_S:
            self.checked_at = now
            self.answer = FanOut.objects.filter(id=self.fan_out_id).exclude(instance__status=Status.TERMINATED).exists()
        return self.answer


class ItemStep:
    """The step a packed workflow item's `run` receives: the carrier's, its step names prefixed
    `item-<index>.` so every item's steps are its own."""

    def __init__(self, step: Any, index: int) -> None:
        self._step = step
        self._prefix = f"item-{index}."
        self.last = ""  # the last step name it asked for: the one a failure most likely came from

    def _name(self, name: str) -> str:
        self.last = self._prefix + name
        return self.last

    @property
    def version(self) -> int:
        return int(self._step.version)

    def version_at_least(self, version: int) -> bool:
        return bool(self._step.version_at_least(version))

    def call(self, name: str, fn: Callable[..., Any], **options: Any) -> StepCall:
        return StepCall(self._prefix + name, fn, options)

    def do(self, name: str, fn: Callable[..., Any], **options: Any) -> Any:
        return self._step.do(self._name(name), fn, **options)

    def all_settled(self, calls: Sequence[StepCall], *, concurrency: int | None = None) -> Any:
        return self._step.all_settled(calls, concurrency=concurrency)

    def all(self, calls: Sequence[StepCall], *, concurrency: int | None = None) -> Any:
        return self._step.all(calls, concurrency=concurrency)

    def sleep(self, name: str, duration: Any) -> None:
        self._step.sleep(self._name(name), duration)

    def sleep_until(self, name: str, when: datetime | str | float | int) -> None:
        self._step.sleep_until(self._name(name), when)

    def wait_for_event(self, name: str, **options: Any) -> Any:
        return self._step.wait_for_event(self._name(name), **options)

    def wait_for_approval(self, name: str, **options: Any) -> Any:
        return self._step.wait_for_approval(self._name(name), **options)

    def set_search_attributes(self, **values: Any) -> dict[str, str]:
        """Checked, not stored: the carrier holds many items, and its attributes cannot be each
        item's."""
        from ingest.engine.services.attributes import attributes_check

        attributes_check(values)
        return {}

    def child(self, name: str, **options: Any) -> Any:
        return self._step.child(self._name(name), **options)

    def fan_out(self, name: str, handler: Any, items: Sequence[Any], **options: Any) -> Any:
        return self._step.fan_out(self._name(name), handler, items, **options)

    def poll(self, name: str, check: Callable[..., Any], **options: Any) -> Any:
        return self._step.poll(self._name(name), check, **options)
