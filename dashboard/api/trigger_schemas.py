"""Request bodies of the trigger endpoints (schedules, routes, subscriptions, ingress credentials).

Their fields take the JSON value as sent: the triggers' services check every field and name every
wrong one at once (400 with `fields`), as the console's forms show them, so a request with three
wrong fields learns all three in one answer. Each field's schema states the rules the service
checks, so the document stays truthful; a field the body does not know is refused with 422.
"""

from __future__ import annotations

from typing import Any, cast
from zoneinfo import available_timezones

from ninja import Field
from pydantic import ConfigDict, JsonValue

from dashboard.api import schemas as s
from dashboard.api.openapi import NONBLANK_PATTERN, TRIMMED_OR_EMPTY_PATTERN, TRIMMED_PATTERN
from ingest.triggers import coalesce as coalescing
from ingest.triggers.field_checks import TENANT_MAX, startable_workflows
from ingest.triggers.models import MissedFirePolicy
from ingest.triggers.services import credentials, routes, schedules, subscriptions

TIMEZONES = cast("list[JsonValue]", sorted(available_timezones()))  # IANA names ZoneInfo reads
# Five cron fields within their ranges (minute hour day-of-month month day-of-week), each a list
# of `*`, a number or a range, with an optional step; or a macro such as @daily. What croniter
# accepts beyond it (names such as MON) is left out of the schema. Quartz's extensions are in,
# where `validate_cron` takes them: `L` among the days of the month (without a step), `15W` alone
# in its field, `LW` alone and only with `*` as the day of week, `5L` and `5#3` among the days of
# the week (without a step, and not in a list with plain days). An expression that matches no date (February 30th) is
# valid: its schedule never fires.
_N = {
    "min": r"[0-5]?[0-9]",
    "hour": r"(?:[01]?[0-9]|2[0-3])",
    "dom": r"(?:0?[1-9]|[12][0-9]|3[01])",
    "mon": r"(?:0?[1-9]|1[0-2])",
    "dow": r"[0-7]",
}
_RANGE = {k: rf"(?:\*|{n}(?:-{n})?)(?:/[1-9][0-9]?)?" for k, n in _N.items()}


def _items(item: str) -> str:
    return rf"{item}(?:,{item})*"


_DOM_ITEM = rf"(?:{_RANGE['dom']}|L)"
_DOM = rf"(?:{_N['dom']}W|{_items(_DOM_ITEM)})"
_DOW = rf"(?:{_items(_RANGE['dow'])}|{_items('[0-7](?:L|#[1-5])')})"
_MIN, _HOUR, _MON = _items(_RANGE["min"]), _items(_RANGE["hour"]), _items(_RANGE["mon"])
CRON_PATTERN = (
    r"^(?:@(?:yearly|annually|monthly|weekly|daily|midnight|hourly)|"
    + rf"{_MIN} {_HOUR} (?:LW {_MON} \*|{_DOM} {_MON} {_DOW})"
    + ")$"
)


def checked(default: Any, **rule: Any) -> Any:
    """A body field the service checks; `rule` is its JSON Schema, for clients."""
    return Field(default, json_schema_extra=rule)


def _workflow(schema: dict[str, Any]) -> None:
    # Read when the document is made: the workflows registered in this process.
    schema.update(type="string", enum=startable_workflows())


def workflow_field(default: Any = ...) -> Any:
    return Field(default, json_schema_extra=_workflow)


def _nullable(rule: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [rule, {"type": "null"}]}


def at_least_one(*names: str) -> ConfigDict:
    """An edit sends at least one of `names`, and none of them null (nothing to change is a 400)."""
    return ConfigDict(extra="forbid", json_schema_extra={"anyOf": [{"required": [name]} for name in names]})


BOOLEAN = {"type": "boolean"}
TENANT = {"type": "string", "minLength": 1, "maxLength": TENANT_MAX, "pattern": TRIMMED_PATTERN}
WHOLE_PRIORITY = {"type": "integer", "minimum": -routes.PRIORITY_MAX, "maximum": routes.PRIORITY_MAX}
RATE = {"type": "integer", "minimum": 1, "maximum": routes.RATE_MAX}
PARAMS = {"type": "object"}  # the document's Params: no key the engine sets itself


# --- routes -------------------------------------------------------------------------------


class RouteEditIn(s.InputSchema):
    """The settings to change; the others keep their value. A refusal changes none of them."""

    model_config = at_least_one(*routes.EDITABLE)
    workflow: Any = workflow_field(None)
    enabled: Any = checked(None, **BOOLEAN)
    sync_default: Any = checked(None, **BOOLEAN)
    wait_seconds: Any = checked(None, type="number", minimum=routes.WAIT_MIN, maximum=routes.WAIT_MAX)
    rate_limit_per_minute: Any = checked(None, **_nullable(RATE))
    idempotency_ttl_seconds: Any = checked(None, type="integer", minimum=routes.TTL_MIN, maximum=routes.TTL_MAX)
    priority: Any = checked(None, **WHOLE_PRIORITY)
    description: Any = checked(None, type="string", maxLength=routes.DESCRIPTION_MAX)


class RouteIn(s.InputSchema):
    """A new route: POST /api/routes/<name> then starts `workflow` in `tenant`."""

    name: Any = checked(
        ..., type="string", pattern=routes.NAME_PATTERN, **{"not": {"enum": sorted(routes.RESERVED_NAMES)}}
    )
    tenant: Any = checked(..., **TENANT)
    workflow: Any = workflow_field()
    enabled: Any = checked(True, **BOOLEAN)
    sync_default: Any = checked(False, **BOOLEAN)
    wait_seconds: Any = checked(30.0, type="number", minimum=routes.WAIT_MIN, maximum=routes.WAIT_MAX)
    rate_limit_per_minute: Any = checked(None, **_nullable(RATE))
    idempotency_ttl_seconds: Any = checked(24 * 3600, type="integer", minimum=routes.TTL_MIN, maximum=routes.TTL_MAX)
    priority: Any = checked(0, **WHOLE_PRIORITY)
    description: Any = checked("", type="string", maxLength=routes.DESCRIPTION_MAX)


# --- schedules ----------------------------------------------------------------------------

CRON = {"type": "string", "maxLength": schedules.CRON_MAX, "pattern": CRON_PATTERN}
ZONE = {"type": "string", "enum": TIMEZONES}
POLICY = {"type": "string", "enum": list(MissedFirePolicy.values)}
CATCH_UP = {"type": "integer", "minimum": 1, "maximum": schedules.CATCH_UP_MAX}


class ScheduleEditIn(s.InputSchema):
    """The fields to change; the others keep their value. A refusal changes none of them."""

    model_config = at_least_one(*schedules.EDITABLE)
    workflow: Any = workflow_field(None)
    cron: Any = checked(None, **CRON)
    timezone: Any = checked(None, **ZONE)
    missed_fire_policy: Any = checked(None, **POLICY)
    catch_up_limit: Any = checked(None, **CATCH_UP)
    params: Any = checked(None, **PARAMS)
    enabled: Any = checked(None, **BOOLEAN)


class ScheduleIn(s.InputSchema):
    """A new schedule: it fires from its creation on, starting `workflow` in `tenant`."""

    name: Any = checked(
        ..., type="string", pattern=schedules.NAME_PATTERN, **{"not": {"enum": sorted(schedules.RESERVED_NAMES)}}
    )
    tenant: Any = checked(..., **TENANT)
    workflow: Any = workflow_field()
    cron: Any = checked(..., **CRON)
    timezone: Any = checked("UTC", **ZONE)
    missed_fire_policy: Any = checked(MissedFirePolicy.SKIP.value, **POLICY)
    catch_up_limit: Any = checked(1, **CATCH_UP)
    params: Any = checked({}, **PARAMS)
    enabled: Any = checked(True, **BOOLEAN)


# --- coalesce (routes and subscriptions) --------------------------------------------------

# A duration as `parse_duration` reads it: words ("30 seconds") or a number of seconds, from
# 100 ms to 7 days. Words state their range only in the service, which names the field.
_DURATION = {
    "anyOf": [
        {"type": "string", "pattern": NONBLANK_PATTERN},
        {
            "type": "number",
            "minimum": coalescing.MIN_PERIOD.total_seconds(),
            "maximum": coalescing.MAX_PERIOD.total_seconds(),
        },
    ]
}
# A dotted path into the payload ("account", "customer.id"); empty or null: one window for all.
_KEY = {
    "anyOf": [
        {"type": "string", "maxLength": coalescing.MAX_KEY_CHARS, "pattern": r"^(?:[^.\x00]+(?:\.[^.\x00]+)*|)$"},
        {"type": "null"},
    ]
}
COALESCE: dict[str, Any] = {
    "description": 'Debounce or batch the events per key: {"debounce": {"key", "period", '
    '"timeout"}} or {"batch": {"key", "max_size", "timeout"}}; null or {} '
    "turns it off. A debounce's timeout is at least its period (checked by the service).",
    "anyOf": [
        {
            "type": "object",
            "additionalProperties": False,
            "required": [coalescing.DEBOUNCE],
            "properties": {
                coalescing.DEBOUNCE: {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["period"],
                    "properties": {
                        "key": _KEY,
                        "period": _DURATION,
                        "timeout": {"anyOf": [_DURATION, {"type": "null"}]},
                    },
                }
            },
        },
        {
            "type": "object",
            "additionalProperties": False,
            "required": [coalescing.BATCH],
            "properties": {
                coalescing.BATCH: {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["max_size", "timeout"],
                    "properties": {
                        "key": _KEY,
                        "timeout": _DURATION,
                        "max_size": {"type": "integer", "minimum": 2, "maximum": coalescing.MAX_BATCH_SIZE},
                    },
                }
            },
        },
        {"type": "object", "maxProperties": 0},
        {"type": "null"},
    ],
}


def _coalesce(schema: dict[str, Any]) -> None:
    schema.clear()
    schema.update(COALESCE)


def coalesce_field() -> Any:
    """A coalesce setting, stated as the service reads it (ingest/triggers/coalesce.py)."""
    return Field(None, json_schema_extra=_coalesce)


# --- subscriptions ------------------------------------------------------------------------

PATTERN = {"type": "string", "pattern": subscriptions.PATTERN_PATTERN}
_FILTER_SCALAR = {"type": ["string", "number", "boolean", "null"]}
FILTERS = {
    "type": "object",
    "maxProperties": subscriptions.FILTERS_MAX,
    "propertyNames": {"minLength": 1, "maxLength": subscriptions.FILTER_KEY_MAX, "pattern": TRIMMED_PATTERN},
    "additionalProperties": {
        "anyOf": [
            _FILTER_SCALAR,
            {"type": "array", "maxItems": subscriptions.FILTER_VALUES_MAX, "items": _FILTER_SCALAR},
        ]
    },
}


class SubscriptionEditIn(s.InputSchema):
    """The fields to change; the others keep their value. A refusal changes none of them."""

    model_config = at_least_one(*subscriptions.EDITABLE)
    workflow: Any = workflow_field(None)
    pattern: Any = checked(None, **PATTERN)
    filters: Any = checked(None, **FILTERS)
    enabled: Any = checked(None, **BOOLEAN)


class SubscriptionIn(s.InputSchema):
    """A new subscription: events of `tenant` (empty: of every tenant, staff only) whose type
    matches `pattern` and whose data match `filters` start `workflow`."""

    workflow: Any = workflow_field()
    pattern: Any = checked(..., **PATTERN)
    tenant: Any = checked(..., type="string", maxLength=TENANT_MAX, pattern=TRIMMED_OR_EMPTY_PATTERN)
    filters: Any = checked({}, **FILTERS)
    enabled: Any = checked(True, **BOOLEAN)
    coalesce: Any = coalesce_field()


# --- ingress credentials ------------------------------------------------------------------


class CredentialIn(s.InputSchema):
    """A new ingress credential of `tenant`; its token and secret are in the answer only."""

    tenant: Any = checked(..., **TENANT)
    name: Any = checked("default", type="string", pattern=credentials.NAME_PATTERN)
    rate_limit_per_minute: Any = checked(
        None, **_nullable({"type": "integer", "minimum": 1, "maximum": credentials.RATE_MAX})
    )


class RotateIn(s.InputSchema):
    """Why, and how long the replaced pair keeps working (0: it stops at once)."""

    reason: Any = checked(..., type="string", maxLength=credentials.REASON_MAX, pattern=NONBLANK_PATTERN)
    overlap_seconds: Any = checked(
        credentials.OVERLAP_DEFAULT, type="integer", minimum=0, maximum=credentials.OVERLAP_MAX
    )
