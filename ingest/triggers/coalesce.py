"""Debounce and batching of the events that start a workflow (pure: parsing, keys, due times).

A route or a subscription may carry a `coalesce` setting (JSON):

    {"debounce": {"key": "account", "period": "30 seconds", "timeout": "5 minutes"}}
        One instance per key after `period` without a new event for that key; the last event
        wins (its payload becomes the params). `timeout` caps how long the first event of a
        window can be held back by later ones (none: a steady stream holds it back forever).

    {"batch": {"key": "account", "max_size": 100, "timeout": "10 seconds"}}
        One instance per key per `max_size` events or `timeout` after the window's first event,
        whichever comes first; the params are {"events": [payload, ...]} in arrival order.

`key` is a dotted path into the payload ("customer.id"); events without it (or without a key
setting) share the window of the empty key. The writes live in services/coalesce.py.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ingest.engine import InvalidDuration, parse_duration
from ingest.triggers.errors import InvalidCoalesce

DEBOUNCE = "debounce"
BATCH = "batch"
MIN_PERIOD = timedelta(milliseconds=100)
MAX_PERIOD = timedelta(days=7)
MAX_BATCH_SIZE = 1000
# A batch's params hold every payload: it closes early rather than grow past this.
MAX_BATCH_BYTES = 4 * 1024 * 1024
MAX_KEY_CHARS = 200


@dataclass(frozen=True)
class CoalesceConfig:
    mode: str  # DEBOUNCE or BATCH
    key_path: tuple[str, ...]  # () : one window for every event
    period: timedelta  # debounce: the quiet period; batch: the timeout after the first event
    timeout: timedelta | None = None  # debounce only: the longest a window stays open
    max_size: int = 0  # batch only

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"key": ".".join(self.key_path)}
        if self.mode == DEBOUNCE:
            body["period"] = f"{self.period.total_seconds():g} seconds"
            if self.timeout is not None:
                body["timeout"] = f"{self.timeout.total_seconds():g} seconds"
        else:
            body.update(max_size=self.max_size, timeout=f"{self.period.total_seconds():g} seconds")
        return {self.mode: body}


def parse(value: Any) -> CoalesceConfig | None:
    """The setting a route or subscription stores, checked; None when it coalesces nothing."""
    if value is None or value == {}:
        return None
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in (DEBOUNCE, BATCH):
        raise InvalidCoalesce(
            'coalesce is {"debounce": {"key", "period", "timeout"}} or {"batch": {"key", "max_size", '
            f'"timeout"}}, one of the two; got {_short(value)}'
        )
    mode, body = next(iter(value.items()))
    if not isinstance(body, dict):
        raise InvalidCoalesce(f"coalesce.{mode} must be an object, got {_short(body)}")
    allowed = {"key", "period", "timeout"} if mode == DEBOUNCE else {"key", "max_size", "timeout"}
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidCoalesce(
            f"coalesce.{mode} has unknown field(s) {', '.join(unknown)}; it takes {', '.join(sorted(allowed))}"
        )
    key_path = _key_path(body.get("key", ""), mode)
    if mode == DEBOUNCE:
        if "period" not in body:
            raise InvalidCoalesce('coalesce.debounce needs a period, e.g. "30 seconds"')
        period = _duration(body["period"], "coalesce.debounce.period")
        timeout = None if body.get("timeout") is None else _duration(body["timeout"], "coalesce.debounce.timeout")
        if timeout is not None and timeout < period:
            raise InvalidCoalesce(
                f"coalesce.debounce.timeout ({timeout.total_seconds():g} s) is shorter "
                f"than its period ({period.total_seconds():g} s); make it at least as long"
            )
        return CoalesceConfig(DEBOUNCE, key_path, period, timeout=timeout)
    size = body.get("max_size")
    if isinstance(size, bool) or not isinstance(size, int) or not 2 <= size <= MAX_BATCH_SIZE:
        raise InvalidCoalesce(
            f"coalesce.batch.max_size must be a whole number from 2 to {MAX_BATCH_SIZE}, got {_short(size)}"
        )
    if "timeout" not in body:
        raise InvalidCoalesce(
            'coalesce.batch needs a timeout, e.g. "10 seconds": a batch that never fills would otherwise never start'
        )
    return CoalesceConfig(BATCH, key_path, _duration(body["timeout"], "coalesce.batch.timeout"), max_size=size)


def key_of(config: CoalesceConfig, payload: dict[str, Any]) -> str:
    """The window key of one payload: the value at the key path as canonical JSON text (a
    string as itself), hashed when long; "" when the path is absent or not set."""
    value: Any = payload
    for part in config.key_path:
        if not isinstance(value, dict) or part not in value:
            return ""
        value = value[part]
    if not config.key_path or value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
    if len(text) > MAX_KEY_CHARS:
        return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return text


def starts_at(config: CoalesceConfig, *, first_at: datetime, now: datetime) -> datetime:
    """When the window's instance starts, given its first event and the one arriving `now`."""
    if config.mode == BATCH:
        return first_at + config.period
    due = now + config.period
    if config.timeout is not None:
        due = min(due, first_at + config.timeout)
    return due


def _key_path(raw: Any, mode: str) -> tuple[str, ...]:
    if raw in (None, ""):
        return ()
    if not isinstance(raw, str) or len(raw) > 200 or any(not part for part in raw.split(".")):
        raise InvalidCoalesce(
            f"coalesce.{mode}.key is a dotted path into the payload such as "
            f'"account" or "customer.id", got {_short(raw)}'
        )
    return tuple(raw.split("."))


def _duration(raw: Any, what: str) -> timedelta:
    try:
        value = parse_duration(raw, what=what)
    except InvalidDuration as exc:
        raise InvalidCoalesce(str(exc)) from None
    if not MIN_PERIOD <= value <= MAX_PERIOD:
        raise InvalidCoalesce(f"{what} must lie between 100 milliseconds and 7 days, got {_short(raw)}")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
