"""Pure decisions about alerts: what a rule's parameters may be, which rule a signal concerns,
and whether a firing group may send now. No database, no clock: `now` is an argument."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ingest.alerts.errors import InvalidRule
from ingest.alerts.models import Condition
from ingest.engine import redact, redact_value

# Workflows whose failures never raise alerts: a failed delivery alerting would deliver again.
SILENT_WORKFLOWS = frozenset({"alert-deliver"})
COMPLETED_WITH_ERRORS = "completed_with_errors"  # the status string engine fan-out writes

# condition -> {param: (type, default, minimum)}; a default of None means required.
PARAMS: dict[str, dict[str, tuple[type, Any, float | None]]] = {
    Condition.INSTANCE_FAILED: {"workflow": (str, "", None)},
    Condition.COMPLETED_WITH_ERRORS: {"workflow": (str, "", None)},
    Condition.DEAD_LETTER_NEW_SIGNATURE: {"workflow": (str, "", None)},
    Condition.DEAD_LETTER_GROWTH: {"workflow": (str, "", None), "count": (int, 10, 1), "minutes": (int, 15, 1)},
    Condition.BUDGET_THRESHOLD: {"percent": (int, 80, 1)},
    Condition.APPROVAL_CREATED: {"workflow": (str, "", None)},
    Condition.APPROVAL_OVERDUE: {"workflow": (str, "", None)},
    Condition.BACKLOG_AGE: {"minutes": (int, 5, 1)},
    Condition.NO_LIVE_WORKER: {"minutes": (int, 5, 1)},
    Condition.INGRESS_5XX_RATE: {"percent": (int, 5, 1), "minutes": (int, 5, 1), "min_count": (int, 3, 1)},
}
EVENT_CONDITIONS = frozenset(
    {
        Condition.INSTANCE_FAILED,
        Condition.COMPLETED_WITH_ERRORS,
        Condition.DEAD_LETTER_NEW_SIGNATURE,
        Condition.APPROVAL_CREATED,
    }
)


def params_clean(condition: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """The rule's parameters with defaults filled in; InvalidRule names what is wrong."""
    if condition not in PARAMS:
        raise InvalidRule(f"condition {condition!r} is unknown; use one of {', '.join(sorted(PARAMS))}")
    given = dict(params or {})
    spec = PARAMS[condition]
    unknown = sorted(set(given) - set(spec))
    if unknown:
        raise InvalidRule(
            f"condition {condition} takes {', '.join(sorted(spec)) or 'no parameters'}; not {', '.join(unknown)}"
        )
    clean: dict[str, Any] = {}
    for name, (kind, default, minimum) in spec.items():
        value = given.get(name, default)
        if kind is int:
            # A JSON integer may be written 25.0 (JSON Schema counts it as one): read it as 25.
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip().isdigit():
                raise InvalidRule(f"{name} of a {condition} rule must be a whole number; got {value!r}")
            value = int(value)
            if minimum is not None and value < minimum:
                raise InvalidRule(f"{name} of a {condition} rule must be at least {minimum:g}; got {value}")
        elif not isinstance(value, str) or len(value) > 200:
            raise InvalidRule(f"{name} of a {condition} rule must be text of at most 200 characters")
        clean[name] = value
    if condition == Condition.BUDGET_THRESHOLD and clean["percent"] > 1000:
        raise InvalidRule("percent of a budget_threshold rule must be at most 1000 (80 and 100 are usual)")
    return clean


@dataclass(frozen=True)
class Signal:
    """Something that happened, as an alert sees it: which condition, in which tenant, its group
    (one firing alert per rule and group) and the facts a message shows."""

    condition: str
    tenant: str
    group_key: str
    title: str
    workflow: str = ""
    facts: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # What an alert says is kept (alert facts, notification bodies) and sent to every
        # channel: an error message quoted in the facts loses any secret it carried here.
        object.__setattr__(self, "title", redact(self.title))
        object.__setattr__(self, "facts", redact_value(self.facts))


@dataclass(frozen=True)
class Clear:
    """A condition that is over for a group: its firing alerts resolve."""

    condition: str
    tenant: str
    group_key: str


def history_signals(row: dict[str, Any]) -> list[Signal | Clear]:
    """What one history row (kind, status, workflow, tenant, instance_id, data) means for alerts.
    A dead letter's signature is not in the row: the follower adds that signal itself."""
    kind, status, workflow = row["kind"], row["status"], row["workflow"]
    tenant, iid, data = row["tenant"], row["instance_id"], row.get("data") or {}
    if workflow in SILENT_WORKFLOWS:
        return []
    if kind == "instance.status" and status == "errored":
        facts = {
            "instance": iid,
            "error": data.get("error", ""),
            "message": data.get("message", ""),
            "step": data.get("step", ""),
        }
        return [Signal(Condition.INSTANCE_FAILED, tenant, workflow, f"{workflow} failed", workflow, facts)]
    if kind == "instance.status" and status == COMPLETED_WITH_ERRORS:
        return [
            Signal(
                Condition.COMPLETED_WITH_ERRORS,
                tenant,
                workflow,
                f"{workflow} completed with errors",
                workflow,
                {"instance": iid},
            )
        ]
    if kind == "instance.status" and status == "complete":
        return [
            Clear(Condition.INSTANCE_FAILED, tenant, workflow),
            Clear(Condition.COMPLETED_WITH_ERRORS, tenant, workflow),
        ]
    if kind == "approval" and data.get("state") == "pending" and data.get("approval"):
        title = f"approval waits: {data.get('title', '')}"[:300]
        return [
            Signal(
                Condition.APPROVAL_CREATED,
                tenant,
                f"approval:{data['approval']}",
                title,
                workflow,
                {"instance": iid, "approval": data["approval"], "step": row.get("step_name", "")},
            )
        ]
    return []


def rule_matches(params: dict[str, Any], signal: Signal) -> bool:
    """A rule filtered to one workflow matches only that workflow's signals."""
    wanted = params.get("workflow") or ""
    return not wanted or wanted == signal.workflow


def may_send(*, last_sent_at: datetime | None, window: timedelta, now: datetime) -> bool:
    """One notification per group per window: the first at once, the next once the window passed."""
    return last_sent_at is None or now - last_sent_at >= window


def summary_due(*, unsent: int, last_sent_at: datetime | None, window: timedelta, now: datetime) -> bool:
    """Events held back by the throttle go out as one summary when the window has passed."""
    return unsent > 0 and may_send(last_sent_at=last_sent_at, window=window, now=now)


def budget_level(*, spent: float, limit: float, percent: int) -> bool:
    """True when `spent` has reached `percent` % of `limit` (a zero limit is reached at once)."""
    if limit <= 0:
        return True
    return spent * 100 >= limit * percent


def rate_exceeded(*, errors: int, successes: int, percent: int, min_count: int) -> bool:
    """The 5xx share of ingress answers is at least `percent` %, over at least `min_count` errors."""
    total = errors + successes
    return errors >= min_count and total > 0 and errors * 100 >= total * percent
