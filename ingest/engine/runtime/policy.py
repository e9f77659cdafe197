"""Step configuration and the pure retry decision."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from ingest.engine.durations import parse_duration
from ingest.engine.errors import EngineError, InvalidStepConfig

Backoff = Literal["constant", "linear", "exponential"]
BACKOFFS: tuple[str, ...] = ("constant", "linear", "exponential")
MAX_STEP_NAME = 256
MAX_RESULT_BYTES = 1024 * 1024

DEFAULT_RETRIES: dict[str, Any] = {"limit": 5, "delay": "10 seconds", "backoff": "exponential"}
# The cap on any one delay between retries (Temporal's MaximumInterval) when a step sets none;
# a step whose `delay` is longer keeps its delay as the cap.
DEFAULT_MAX_DELAY = timedelta(minutes=10)
DEFAULT_BACKOFF_COEFFICIENT = 2.0
RETRY_KEYS = ("limit", "delay", "backoff", "max_delay", "backoff_coefficient")
DEFAULT_TIMEOUT = "10 minutes"


@dataclass(frozen=True)
class RetryPolicy:
    limit: int  # retries after the first attempt
    delay: timedelta
    backoff: Backoff
    max_delay: timedelta = DEFAULT_MAX_DELAY  # no delay between retries is longer
    backoff_coefficient: float = DEFAULT_BACKOFF_COEFFICIENT  # exponential: each delay this times the last


@dataclass(frozen=True)
class StepConfig:
    retries: RetryPolicy
    timeout: timedelta

    def as_json(self) -> dict[str, Any]:
        return {
            "retries": {
                "limit": self.retries.limit,
                "delay": self.retries.delay.total_seconds(),
                "backoff": self.retries.backoff,
                "max_delay": self.retries.max_delay.total_seconds(),
                "backoff_coefficient": self.retries.backoff_coefficient,
            },
            "timeout": self.timeout.total_seconds(),
        }

    @functools.cached_property
    def json_text(self) -> str:
        """`as_json()` as JSON text, made once: a config is resolved once per distinct literal
        (`resolve_config`) and written with every first attempt of its steps."""
        return json.dumps(self.as_json())


def next_delay(policy: RetryPolicy, *, attempt: int) -> timedelta | None:
    """Delay before attempt `attempt + 1`, at most `max_delay`, or None when retries are exhausted."""
    if attempt > policy.limit:
        return None
    return min(_uncapped(policy, attempt), policy.max_delay)


def _uncapped(policy: RetryPolicy, attempt: int) -> timedelta:
    match policy.backoff:
        case "constant":
            return policy.delay
        case "linear":
            return policy.delay * attempt
        case "exponential":
            try:
                return policy.delay * policy.backoff_coefficient ** (attempt - 1)
            except OverflowError:  # a long run of retries grows past any duration: the cap holds
                return policy.max_delay if policy.delay else policy.delay
    raise AssertionError(policy.backoff)


def resolve_config(step_name: str, *, retries: object, timeout: object) -> StepConfig:
    """Validate a step's config before it runs; unknown keys and bad values are refused."""
    try:
        key = (repr(retries), repr(timeout))
        return _resolved[key]
    except KeyError:
        pass
    config = _resolve(step_name, retries=retries, timeout=timeout)
    if len(_resolved) < 4096:  # step configs are a handful of literals per workflow
        _resolved[key] = config
    return config


_resolved: dict[tuple[str, str], StepConfig] = {}


def _resolve(step_name: str, *, retries: object, timeout: object) -> StepConfig:
    return StepConfig(
        retries=_resolve_retries(step_name, retries),
        timeout=parse_duration(DEFAULT_TIMEOUT if timeout is None else timeout, what=f"timeout of step {step_name!r}"),
    )


def _resolve_retries(step_name: str, retries: object) -> RetryPolicy:
    if retries is None:
        retries = {}
    if not isinstance(retries, dict):
        raise InvalidStepConfig(
            f"retries of step {step_name!r} must be a dict with limit, delay, backoff, max_delay "
            f"and backoff_coefficient; got {type(retries).__name__}"
        )
    unknown = sorted(set(retries) - set(RETRY_KEYS))
    if unknown:
        raise InvalidStepConfig(
            f"step {step_name!r} has unknown retries key(s) {', '.join(map(repr, unknown))}; "
            "the keys are 'limit', 'delay', 'backoff', 'max_delay' and 'backoff_coefficient'"
        )
    merged = {**DEFAULT_RETRIES, **retries}
    limit = merged["limit"]
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidStepConfig(f"retries.limit of step {step_name!r} must be a whole number ≥ 0; got {limit!r}")
    backoff = merged["backoff"]
    if backoff not in BACKOFFS:
        raise InvalidStepConfig(
            f"retries.backoff of step {step_name!r} is {backoff!r}; use 'constant', 'linear' or 'exponential'"
        )
    delay = parse_duration(merged["delay"], what=f"retries.delay of step {step_name!r}")
    return RetryPolicy(
        limit=limit,
        delay=delay,
        backoff=backoff,
        max_delay=_max_delay(step_name, retries.get("max_delay"), delay=delay),
        backoff_coefficient=_coefficient(step_name, retries.get("backoff_coefficient")),
    )


def _max_delay(step_name: str, value: object, *, delay: timedelta) -> timedelta:
    """The step's cap, at least its delay; without one, 10 minutes (or the delay, when longer,
    so a step that waits an hour between tries keeps waiting an hour)."""
    if value is None:
        return max(DEFAULT_MAX_DELAY, delay)
    cap = parse_duration(value, what=f"retries.max_delay of step {step_name!r}")
    if cap < delay:
        raise InvalidStepConfig(
            f"retries.max_delay of step {step_name!r} is {value!r}, shorter than its delay of "
            f"{delay.total_seconds():g} seconds; max_delay caps every delay between retries, so it "
            "is at least the delay"
        )
    return cap


def _coefficient(step_name: str, value: object) -> float:
    if value is None:
        return DEFAULT_BACKOFF_COEFFICIENT
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 1:
        raise InvalidStepConfig(
            f"retries.backoff_coefficient of step {step_name!r} must be a number ≥ 1 (each exponential "
            f"delay is the last one times it); got {value!r}"
        )
    return float(value)


def stored_config_json(stored: object) -> dict[str, Any] | None:
    """A step's stored config as today's JSON: a row written before `max_delay` and
    `backoff_coefficient` existed shows the defaults it resolves to. None for a step without a
    retry config (sleeps, waits) or one that no longer resolves."""
    if not isinstance(stored, dict) or not isinstance(stored.get("retries"), dict):
        return None
    try:
        return resolve_config("stored", retries=stored["retries"], timeout=stored.get("timeout")).as_json()
    except EngineError:
        return None


def check_step_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidStepConfig(f"step names are non-empty strings; got {name!r}")
    if len(name) > MAX_STEP_NAME:
        raise InvalidStepConfig(
            f"step name {name[:40]!r}… is {len(name)} characters; step names are limited to {MAX_STEP_NAME}"
        )
    return name


STEP_OPTIONS = frozenset({"retries", "timeout", "rollback", "sensitive", "checkpoint"})
CHECKPOINTS = ("immediate", "deferred")


def check_step_options(step_name: str, options: dict[str, Any]) -> None:
    unknown = sorted(set(options) - STEP_OPTIONS)
    if unknown:
        raise InvalidStepConfig(
            f"step {step_name!r} has unknown config key(s) {', '.join(map(repr, unknown))}; "
            "step.do takes retries, timeout, rollback, sensitive and checkpoint"
        )
    checkpoint = options.get("checkpoint", "immediate")
    if checkpoint not in CHECKPOINTS:
        raise InvalidStepConfig(
            f"checkpoint of step {step_name!r} is {checkpoint!r}; use 'immediate' (the default: the "
            "step's completion is durable before the workflow runs on) or 'deferred'"
        )
