"""`step.fan_out`: each item its own instance (or, with `pack`, steps of a carrier instance that
runs several: runtime/fan_out_packs.py), the results back to the parent in input order.

The parent's first turn records the fan-out step (waiting, its wake-up the fan-out's timeout)
and its aggregate row (models/fan_out.py), then inserts the items' instances batch by batch,
each batch one transaction under the parent's lease (a crash between batches resumes at the
next one: `created` counts what committed). The parent then suspends. Each item's final
outcome, in the same transaction as its instance's end, locks the aggregate row, counts
itself once (its FanOutItem row goes from pending to its state, so an item run again later is
not counted again) and, when it is the last, makes the parent runnable: a push, no polling.
At the timeout the parent wakes anyway, closes the aggregate (the items still out become
missing) and goes on with what landed.

Locks, always in this order, so they cannot deadlock: an item's instance row, the aggregate
row, the item's row, the parent's instance row. The parent closes the aggregate in a
transaction of its own that holds no instance row. The writes are in store_fan_out.py, an
item's end in fan_out_items.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from ingest.engine.durations import parse_duration
from ingest.engine.errors import InvalidParams, InvalidStepConfig
from ingest.engine.handlers import Target, resolve_handler
from ingest.engine.models import FanOut, FanOutState, StepKind, StepStatus
from ingest.engine.runtime import store_fan_out
from ingest.engine.runtime.execution import Execution
from ingest.engine.runtime.fan_out_packs import MAX_PACK
from ingest.engine.runtime.outcomes import FailInstance, Suspend
from ingest.engine.runtime.parallel import Settled
from ingest.engine.runtime.policy import MAX_RESULT_BYTES, resolve_config
from ingest.engine.runtime.store_fan_out import Plan
from ingest.engine.runtime.store_waits import wait_resolved
from ingest.engine.workflow import get_workflow

MAX_ITEMS = 100_000
MAX_BATCH = 1_000
MAX_WAIT = timedelta(days=365)


def plan(
    *, step: str, target: Target, batch_size: Any, timeout: Any, retries: Any, item_timeout: Any, pack: Any = 1
) -> Plan:
    """Check a call's options before anything is written, so a bad one fails the parent once,
    not each of its items."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH:
        raise InvalidStepConfig(
            f"fan-out {step!r}: batch_size must be a whole number from 1 to {MAX_BATCH}; got {batch_size!r}"
        )
    if isinstance(pack, bool) or not isinstance(pack, int) or not 1 <= pack <= MAX_PACK:
        raise InvalidStepConfig(
            f"fan-out {step!r}: pack must be a whole number from 1 (an instance per item) to {MAX_PACK}; got {pack!r}"
        )
    if pack > 1 and not target.is_function and get_workflow(target.workflow).is_async():
        raise InvalidStepConfig(
            f"fan-out {step!r}: workflow {target.name!r} is async; packed items run in a synchronous carrier — "
            "leave pack out (an instance per item) or make its run synchronous"
        )
    wait = parse_duration(timeout, what=f"timeout of fan-out {step!r}")
    if not timedelta(0) < wait <= MAX_WAIT:
        raise InvalidStepConfig(f"fan-out {step!r}: timeout must be longer than zero and at most 365 days")
    options: dict[str, Any] = {}
    if target.is_function:
        config = resolve_config(step, retries=retries, timeout=item_timeout)  # raises on a bad config
        if retries is not None:
            options["retries"] = config.as_json()["retries"]
        if item_timeout is not None:
            options["timeout"] = config.timeout.total_seconds()
    elif retries is not None or item_timeout is not None:
        raise InvalidStepConfig(
            f"fan-out {step!r}: retries and item_timeout apply to function handlers; "
            f"workflow {target.name!r} sets its own steps' retries and timeouts"
        )
    return Plan(target=target, options=options, batch_size=batch_size, timeout=wait, pack=pack)


def checked_items(items: Any, *, step: str, target: Target) -> list[Any]:
    """The items as they will be stored (a JSON round trip), each at most 1 MiB."""
    if isinstance(items, str | bytes | dict) or not isinstance(items, Sequence):
        raise InvalidStepConfig(f"fan-out {step!r}: items must be a list; got {type(items).__name__}")
    if len(items) > MAX_ITEMS:
        raise InvalidStepConfig(
            f"fan-out {step!r} got {len(items)} items; the limit is {MAX_ITEMS} per "
            "fan-out — split the work into several fan-outs"
        )
    out = []
    for i, item in enumerate(items):
        if not target.is_function and not isinstance(item, dict):
            raise InvalidParams(
                f"fan-out {step!r}: item {i} must be a dict, the params of a "
                f"{target.name!r} instance; got {type(item).__name__}"
            )
        try:
            text = json.dumps(item, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidParams(f"fan-out {step!r}: item {i} is not JSON-serialisable ({exc})") from None
        if len(text.encode()) > MAX_RESULT_BYTES:
            raise InvalidParams(f"fan-out {step!r}: item {i} is larger than 1 MiB; pass a reference to stored data")
        out.append(json.loads(text))
    return out


def run(
    x: Execution,
    name: str,
    handler: Any,
    items: Any,
    *,
    batch_size: Any,
    timeout: Any,
    retries: Any,
    item_timeout: Any,
    pack: Any = 1,
) -> list[Settled]:
    """`step.fan_out`: start the fan-out (first turn), insert what is left of its items, and
    return every item's outcome once all landed or the timeout passed; else suspend."""
    target = resolve_handler(handler, step=name)
    p = plan(
        step=name,
        target=target,
        batch_size=batch_size,
        timeout=timeout,
        retries=retries,
        item_timeout=item_timeout,
        pack=pack,
    )
    seq, position, rec = x.reserve(name, StepKind.FAN_OUT)
    if rec is not None and rec.status == StepStatus.COMPLETE:
        return store_fan_out.settled(rec.result["fan_out"])
    now = x.now()
    checked: list[Any] | None = None
    if rec is None:
        checked = checked_items(items, step=name, target=target)
        x.checkpoint()
        rec, fan_out = store_fan_out.start(
            x.store, name=name, seq=seq, position=position, plan=p, expected=len(checked), now=now
        )
        x.by_key[(name, seq)] = x.by_pos[position] = rec
    else:
        fan_out = FanOut.objects.get(step_id=rec.id)
    if fan_out.created < fan_out.expected:
        checked = checked if checked is not None else checked_items(items, step=name, target=target)
        if len(checked) != fan_out.expected:
            raise FailInstance(
                x.replay_mismatch(
                    f"instance {x.instance.id}: fan-out {rec.name!r} started with {fan_out.expected} items, but the "
                    f"replay passed {len(checked)}"
                ),
                step=fan_out.step_name,
            )
        store_fan_out.fill(x.store, fan_out, parent=x.instance, items=checked, plan=p, now=now)
    if fan_out.state == FanOutState.OPEN and now >= fan_out.deadline:
        fan_out = store_fan_out.close(fan_out.id, now=now)
    if fan_out.state == FanOutState.OPEN:
        raise Suspend(fan_out.deadline, fan_out=fan_out.id)
    wait_resolved(x.store, rec, now=now, result=store_fan_out.summary(fan_out))
    return store_fan_out.settled(fan_out.id)
