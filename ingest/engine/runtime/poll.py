"""`step.poll`: check until done, with durable exponential sleeps between checks, until a deadline.

Check, wait, check again, as one call. Each check is a `step.do` (its own retries, attempts and
history), each pause a `step.sleep` (the instance is suspended: no thread waits). Whether the
poll is done, and whether its deadline has passed, are decided inside the check's step and
stored with its result, so a replay takes the same path whatever the time is when it replays:

    {"value": <what check returned>, "done": <until(value)>, "at": <when the check ended>}

The deadline runs from the first check's end. The last pause is cut short to end at the
deadline, where one last check runs; not done then, the poll raises PollDeadlineExceeded.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from ingest.engine import clock
from ingest.engine.durations import parse_duration
from ingest.engine.errors import InvalidStepConfig, PollDeadlineExceeded
from ingest.engine.runtime import waits
from ingest.engine.runtime.execution import Execution
from ingest.engine.runtime.invoke import call
from ingest.engine.runtime.waits import checked_wait


def intervals(*, initial: timedelta, factor: float, max_interval: timedelta) -> Callable[[int], timedelta]:
    """The pause after check n (1-based): initial * factor**(n-1), capped at max_interval."""

    def after(n: int) -> timedelta:
        seconds = initial.total_seconds() * factor ** min(n - 1, 64)
        return min(max_interval, timedelta(seconds=min(seconds, max_interval.total_seconds())))

    return after


def run(
    x: Execution,
    do: Callable[..., Any],
    name: str,
    check: Callable[..., Any],
    *,
    until: Callable[[Any], Any] | None,
    initial: Any,
    factor: float,
    max_interval: Any,
    deadline: Any,
    retries: dict[str, Any] | None,
    timeout: Any,
) -> Any:
    pause = _policy(name, initial=initial, factor=factor, max_interval=max_interval)
    limit = checked_wait(parse_duration(deadline, what=f"deadline of poll {name!r}"), name)
    done_when = until if until is not None else bool

    def checked(ctx: Any) -> dict[str, Any]:
        value = call(check, ctx)
        return {"value": value, "done": bool(done_when(value)), "at": clock.now().isoformat()}

    options: dict[str, Any] = {"retries": retries, "timeout": timeout}
    first: datetime | None = None
    n = 0
    while True:
        n += 1
        outcome = do(name, checked, **{k: v for k, v in options.items() if v is not None})
        at = datetime.fromisoformat(outcome["at"])
        first = first or at
        ends = first + limit
        if outcome["done"]:
            return outcome["value"]
        if at >= ends:
            raise PollDeadlineExceeded(name, n, ends.isoformat(), outcome["value"])
        wake = min(at + pause(n), ends)  # from the check's end, as recorded: the same on every replay
        waits.sleep(x, f"{name}-wait", _until(wake))


def _until(wake: datetime) -> Callable[[datetime], datetime]:
    return lambda now: max(now, wake)


def _policy(name: str, *, initial: Any, factor: float, max_interval: Any) -> Callable[[int], timedelta]:
    first = parse_duration(initial, what=f"initial interval of poll {name!r}")
    cap = checked_wait(parse_duration(max_interval, what=f"max_interval of poll {name!r}"), name)
    if isinstance(factor, bool) or not isinstance(factor, int | float) or factor < 1:
        raise InvalidStepConfig(
            f"factor of poll {name!r} must be a number of at least 1 (2 doubles each pause); got {factor!r}"
        )
    if first <= timedelta(0) or cap < first:
        raise InvalidStepConfig(
            f"poll {name!r} needs 0 < initial ≤ max_interval; got initial {first}, max_interval {cap}"
        )
    return intervals(initial=first, factor=float(factor), max_interval=cap)
