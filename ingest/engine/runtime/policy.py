"""Step configuration and the pure retry decision."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from ingest.engine.durations import parse_duration
from ingest.engine.errors import InvalidStepConfig

Backoff = Literal["constant", "linear", "exponential"]
BACKOFFS: tuple[str, ...] = ("constant", "linear", "exponential")
MAX_STEP_NAME = 256
MAX_RESULT_BYTES = 1024 * 1024

DEFAULT_RETRIES: dict[str, Any] = {"limit": 5, "delay": "10 seconds", "backoff": "exponential"}
DEFAULT_TIMEOUT = "10 minutes"


@dataclass(frozen=True)
class RetryPolicy:
    limit: int  # retries after the first attempt
    delay: timedelta
    backoff: Backoff


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
            },
            "timeout": self.timeout.total_seconds(),
        }

    @functools.cached_property
    def json_text(self) -> str:
        """`as_json()` as JSON text, made once: a config is resolved once per distinct literal
        (`resolve_config`) and written with every first attempt of its steps."""
        return json.dumps(self.as_json())


def next_delay(policy: RetryPolicy, *, attempt: int) -> timedelta | None:
    """Delay before attempt `attempt + 1`, or None when retries are exhausted."""
    if attempt > policy.limit:
        return None
    match policy.backoff:
        case "constant":
            return policy.delay
        case "linear":
            return policy.delay * attempt
        case "exponential":
            return policy.delay * int(2 ** (attempt - 1))
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
        timeout=parse_duration(
            DEFAULT_TIMEOUT if timeout is None else timeout, what=f"timeout of step {step_name!r}"
        ),
    )


def _resolve_retries(step_name: str, retries: object) -> RetryPolicy:
    if retries is None:
        retries = {}
    if not isinstance(retries, dict):
        raise InvalidStepConfig(
            f"retries of step {step_name!r} must be a dict with limit, delay and backoff; "
            f"got {type(retries).__name__}"
        )
    unknown = sorted(set(retries) - set(DEFAULT_RETRIES))
    if unknown:
        raise InvalidStepConfig(
            f"step {step_name!r} has unknown retries key(s) {', '.join(map(repr, unknown))}; "
            "the keys are 'limit', 'delay' and 'backoff'"
        )
    merged = {**DEFAULT_RETRIES, **retries}
    limit = merged["limit"]
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidStepConfig(
            f"retries.limit of step {step_name!r} must be a whole number ≥ 0; got {limit!r}"
        )
    backoff = merged["backoff"]
    if backoff not in BACKOFFS:
        raise InvalidStepConfig(
            f"retries.backoff of step {step_name!r} is {backoff!r}; use 'constant', 'linear' "
            "or 'exponential'"
        )
    delay = parse_duration(merged["delay"], what=f"retries.delay of step {step_name!r}")
    return RetryPolicy(limit=limit, delay=delay, backoff=backoff)


def check_step_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidStepConfig(f"step names are non-empty strings; got {name!r}")
    if len(name) > MAX_STEP_NAME:
        raise InvalidStepConfig(
            f"step name {name[:40]!r}… is {len(name)} characters; step names are limited to "
            f"{MAX_STEP_NAME}"
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
