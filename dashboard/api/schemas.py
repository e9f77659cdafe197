"""Request and response schemas of the REST API: the OpenAPI document is generated from these."""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import BeforeValidator, ConfigDict, StrictBool, StrictStr

from dashboard.api.openapi import NONBLANK_PATTERN, TEXT_PATTERN
from dashboard.staleness import VERSION_PATTERN
from ingest.alerts.services import URL_PATTERN as WEBHOOK_URL_PATTERN

ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_-]*$"
# An http(s) URL with a host and no user or password: the pattern `url_problem` checks.
URL_PATTERN = WEBHOOK_URL_PATTERN
_NUMBER = re.compile(r"^\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*$")


def _iso_text(value: object) -> object:
    """A time is ISO 8601 text: pydantic's lax mode would also read a number (or a numeric string)
    as seconds since 1970, which no client means by `until=0.5`."""
    if isinstance(value, datetime) or (isinstance(value, str) and not _NUMBER.match(value)):
        return value
    raise ValueError("send an ISO 8601 time such as 2026-11-22T03:00:00Z")


Moment = Annotated[datetime, BeforeValidator(_iso_text)]


def _not_bool(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError("send a whole number; true and false are not numbers")
    return value


# A whole number as JSON Schema's `integer` reads it: 5 and 5.0, not false.
Whole = Annotated[int, BeforeValidator(_not_bool)]


# A search attribute as the engine stores it (ingest/engine/services/attributes.py): a lower-case
# key; a value of text, a number or a boolean, stored as its text of at most 200 characters.
AttributeKey = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
AttributeValue = (
    Annotated[StrictStr, Field(max_length=200, json_schema_extra={"pattern": TEXT_PATTERN})]
    | StrictBool
    | Annotated[int, Field(ge=-(10**15), le=10**15)]
    | Annotated[float, Field(ge=-1e15, le=1e15, allow_inf_nan=False)]
)


class InputSchema(Schema):
    """A request body: a field it does not know is refused (422 naming it), not silently dropped,
    so a misspelt `from_stp` cannot restart from the first step."""

    model_config = ConfigDict(extra="forbid")


class ErrorBody(Schema):
    code: str
    message: str
    details: list[dict[str, Any]] | None = None
    fields: dict[str, str] | None = Field(
        None,
        description="Each invalid field by name with what is wrong "
        "(`__all__`: the request as a whole), all of them at once",
    )


class ErrorOut(Schema):
    error: ErrorBody


# Every 4xx an acting endpoint may answer, each with the error envelope; one definition so the
# documented statuses cannot drift between routers.
ERRORS: dict[int, Any] = {
    400: ErrorOut,
    401: ErrorOut,
    403: ErrorOut,
    404: ErrorOut,
    409: ErrorOut,
    422: ErrorOut,
}


class WorkflowOut(Schema):
    name: str
    is_async: bool
    concurrency: int | None
    concurrency_key: str | None
    priority: int
    counts: dict[str, int]
    version: int = Field(..., description="The code's current version: new instances start on it")


class InstanceIn(InputSchema):
    workflow: str = Field(..., min_length=1, max_length=200)
    id: str | None = Field(None, max_length=100, pattern=ID_PATTERN)
    params: dict[str, Any] = Field(default_factory=dict)
    tenant: str = Field("default", min_length=1, max_length=100)
    priority: Whole = Field(0, ge=-1000, le=1000)
    start_at: Moment | None = None
    search_attributes: dict[AttributeKey, AttributeValue] = Field(
        default_factory=dict,
        max_length=20,
        json_schema_extra={"additionalProperties": False},
        description="Tags to find the run by (the instances list's `attr` query), set before its first "
        "turn: lower-case keys, text, number or boolean values of at most 200 characters",
    )
    callback_url: str | None = Field(
        None,
        max_length=2000,
        json_schema_extra={"pattern": URL_PATTERN},
        description="POSTed the outcome when the instance ends, signed with the tenant's ingress secret",
    )


class ErrorInfo(Schema):
    name: str
    message: str


class InstanceOut(Schema):
    id: str
    workflow: str
    tenant: str
    status: str
    params: dict[str, Any]
    output: Any = None
    error: ErrorInfo | None = None
    priority: int
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    parent_id: str | None = None
    replay_of_id: str | None = None
    workflow_version: int = 1
    fork_of_id: str | None = None
    fork_step: str | None = None
    status_url: str


class InstanceListed(InstanceOut):
    search_attributes: dict[str, str] = {}


class InstancePage(Schema):
    items: list[InstanceListed]
    next_cursor: str | None
    next_page: int | None = None


class AttemptOut(Schema):
    number: int
    started_at: datetime
    ended_at: datetime | None
    ok: bool
    error: ErrorInfo | None
    retry_delay_seconds: float | None


class ProgressOut(Schema):
    done: float
    total: float | None = None
    message: str = ""
    attempt: int
    at: datetime


class RetryPolicyOut(Schema):
    limit: int = Field(..., description="Retries after the first attempt")
    delay: float = Field(..., description="Seconds before the first retry")
    backoff: Literal["constant", "linear", "exponential"]
    backoff_coefficient: float = Field(..., description="Exponential backoff: each delay is the last one times this")
    max_delay: float = Field(..., description="Seconds: no delay between retries is longer, in any backoff")


class StepConfigOut(Schema):
    retries: RetryPolicyOut
    timeout: float = Field(..., description="Seconds per attempt")


class StepOut(Schema):
    name: str
    status: str
    kind: str
    seq: int
    position: int
    result: Any = None
    error: ErrorInfo | None
    attempts: list[AttemptOut]
    started_at: datetime
    ended_at: datetime | None
    wake_at: datetime | None
    sensitive: bool
    config: StepConfigOut | None = Field(None, description="step.do's retries and timeout; none for sleeps and waits")
    progress: ProgressOut | None = None
    non_retryable: bool = Field(
        False,
        description="It failed for good (NonRetryableError, or failed without "
        "using its retries): a retry fails the same way; replay with edited params",
    )


NON_RETRYABLE = (
    "The instance errored at a step that failed for good (NonRetryableError): a retry runs it "
    "on the same input and fails the same way; replay it with edited params instead"
)


class InstanceDetail(InstanceOut):
    steps: list[StepOut]
    forks: list[str] = Field(default_factory=list, description="Instances forked from this one, oldest first")
    version: str = Field(
        ...,
        description="What the instance is now, for an action's expected_version: it moves "
        "when an operator acts on it or it ends, not with its steps",
    )
    non_retryable: bool = Field(..., description=NON_RETRYABLE)


class LogLineOut(Schema):
    at: datetime
    level: str = Field(..., description="logging's level name: DEBUG, INFO, WARNING, ERROR, CRITICAL")
    logger: str
    message: str = Field(
        ..., description="the line as logged (a traceback follows it), secrets redacted, at most 4,000 characters"
    )


class AttemptLogOut(Schema):
    number: int
    running: bool = Field(
        ...,
        description="the attempt has not ended: its lines so far, written every "
        "RUNLEDGER_STEP_LOG_SECONDS while it runs; more may come",
    )
    lines: list[LogLineOut] = Field(..., description="its last lines, oldest first")
    dropped: int = Field(
        ...,
        ge=0,
        description="earlier lines left out: an attempt keeps its last "
        "RUNLEDGER_STEP_LOG_LINES lines and RUNLEDGER_STEP_LOG_BYTES of them",
    )
    truncated: bool = Field(..., description="dropped is more than 0")


class StepLogsOut(Schema):
    name: str
    seq: int
    position: int
    status: str
    attempts: list[AttemptLogOut] = Field(..., description="the attempts that logged, in order")


class InstanceLogsOut(Schema):
    instance_id: str
    status: str
    steps: list[StepLogsOut] = Field(
        ..., description="the steps that logged (or the one asked for), in the order the run asked for them"
    )
    next_after: int | None = Field(..., description="more steps follow: pass this as `after`")


class HistoryOut(Schema):
    id: int
    kind: str
    step_name: str
    status: str
    data: dict[str, Any]
    actor: str
    reason: str
    created_at: datetime


class HistoryPage(Schema):
    items: list[HistoryOut]
    next_after: int | None


EXPECTED_VERSION = (
    "The `version` of the resource as the caller last read it: the action is refused (409, "
    "code `stale`, saying what changed) when it moved since. Omitted: no check."
)


class ReasonIn(InputSchema):
    reason: str = Field("", max_length=2000)
    expected_version: str | None = Field(None, pattern=VERSION_PATTERN, description=EXPECTED_VERSION)


class TerminateIn(ReasonIn):
    rollback: StrictBool = False  # true or false; 0 and "yes" are not booleans


class RestartIn(ReasonIn):
    from_step: str | None = Field(None, max_length=256)


class ReplayIn(ReasonIn):
    params: dict[str, Any] | None = None


class ForkIn(ReasonIn):
    from_step: str = Field(
        ..., min_length=1, max_length=300, description="The step to start at: its name, or name#2 for its second call"
    )
    params: dict[str, Any] | None = Field(None, description="The fork's params; default: the original's")
    id: str | None = Field(None, max_length=100, pattern=ID_PATTERN)


class VersionOut(Schema):
    version: int
    current: bool
    instances: int = Field(..., description="Instances started on it, in the caller's tenants")
    running: int = Field(..., description="Of those, how many have not finished")
    retired_at: datetime | None
    retired_by: str
    retirable: bool


EVENT_TYPE_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,199}$"  # ingest/triggers/patterns.py EVENT_TYPE


class EventIn(InputSchema):
    # Not blank: the engine refuses a type that strip() empties (instance_send_event).
    type: str = Field(..., min_length=1, max_length=200, pattern=NONBLANK_PATTERN)
    payload: Any = None
    expected_version: str | None = Field(None, pattern=VERSION_PATTERN, description=EXPECTED_VERSION)


class PublishIn(InputSchema):
    type: str = Field(..., min_length=1, max_length=200, pattern=EVENT_TYPE_PATTERN)
    data: dict[str, Any] = Field(default_factory=dict)
    id: str | None = Field(None, min_length=1, max_length=200)
    tenant: str = Field("default", min_length=1, max_length=100)
    instance_id: str | None = Field(None, max_length=100)


class PublishOut(Schema):
    event_id: str
    started: list[str]
    delivered: list[str]
    duplicate: bool


class OkOut(Schema):
    ok: bool
    instance_id: str
    status: str
    version: str = Field(..., description="The instance's version after the action (send it as expected_version)")


class RedriveFilter(InputSchema):
    """Every open dead letter that matches, in `tenant` or else in all the caller's acting tenants."""

    workflow: str | None = Field(None, max_length=200)
    step_name: str | None = Field(None, max_length=300)
    signature: str | None = Field(None, max_length=64)
    tenant: str | None = Field(None, max_length=100)
    since: Moment | None = None
    until: Moment | None = None


class RedriveOut(Schema):
    redriven: int


class CostRow(Schema):
    id: int
    service: str
    cost: Decimal
    instance_id: str | None
    workflow_type: str
    step_name: str
    attempt: int
    success: bool
    model: str
    tenant: str
    created_at: datetime


class CostTotal(Schema):
    service: str
    cost: Decimal
    calls: int


class CostsOut(Schema):
    total: Decimal
    by_service: list[CostTotal]
    items: list[CostRow]


class BudgetIn(InputSchema):
    scope: Literal["tenant", "workflow", "service", "instance"]
    key: str = Field(..., min_length=1, max_length=200)
    period: Literal["hour", "day", "month"]
    limit: Decimal = Field(
        ...,
        ge=0,
        max_digits=14,
        decimal_places=6,
        json_schema_extra={
            "anyOf": [
                {"type": "integer", "minimum": 0, "maximum": 99_999_999},
                {"type": "string", "pattern": r"^[0-9]{1,8}(?:\.[0-9]{1,6})?$"},
            ]
        },
    )
    policy: Literal["fail", "approval"] = "fail"


class RunNowOut(Schema):
    instance_id: str
    status_url: str
