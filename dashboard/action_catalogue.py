"""The operator actions' catalogue: each action on one instance, what it does (shown in its
confirmation) and in which statuses it applies; and whether a failed step failed for good, so a
retry cannot help.

Read by the instance page's view (its buttons and confirmations), by the live renderer that
re-draws those buttons when the instance's status changes, and by the service that acts
(dashboard/actions.py), which re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass

from ingest.engine import BudgetExceeded, NonRetryableError, error_class_name
from ingest.engine.models import FINISHED_STATUSES, Instance, Status


@dataclass(frozen=True)
class Action:
    name: str
    label: str
    explain: str  # what will happen, shown in the confirmation
    danger: bool = False
    when: frozenset[str] = frozenset(Status.values)


_ACTIVE = frozenset(Status.values) - FINISHED_STATUSES
ACTIONS: dict[str, Action] = {
    a.name: a
    for a in [
        Action(
            "pause",
            "Pause",
            "The instance stops after its running step ends (waitingForPause, then "
            "paused). Sleep and retry timers are shifted by the paused time on resume.",
            when=frozenset({Status.QUEUED, Status.RUNNING, Status.WAITING}),
        ),
        Action(
            "resume",
            "Resume",
            "The instance continues where it paused; nothing re-runs.",
            when=frozenset({Status.PAUSED, Status.WAITING_FOR_PAUSE}),
        ),
        Action(
            "terminate",
            "Terminate",
            "The instance ends as terminated. Completed steps keep their "
            "results. With rollback, the rollback handlers of completed steps run in reverse order.",
            danger=True,
            when=_ACTIVE,
        ),
        Action(
            "restart",
            "Restart",
            "The instance runs again: from scratch, or keeping every step "
            "result before the chosen step. Steps after that point run again (paid calls too).",
            danger=True,
        ),
        Action(
            "retry",
            "Retry",
            "The errored instance runs again from its failed step; completed steps are not re-run.",
            when=frozenset({Status.ERRORED}),
        ),
        Action(
            "replay",
            "Replay…",
            "A new instance of the same workflow starts with these params, "
            "linked to this one (replay_of). This instance is not changed.",
        ),
        Action(
            "fork",
            "Fork…",
            "A new instance of the same workflow starts at the chosen step: the results "
            "of every step before it are copied (not run again), that step and the rest run with these "
            "params. Linked both ways to this one (fork of). This instance is not changed.",
        ),
        Action(
            "event",
            "Send event",
            "The event is delivered to the instance: a waiting "
            "wait_for_event of that type receives it, otherwise it is buffered (first in, first out).",
            when=_ACTIVE,
        ),
    ]
}


def available_actions(instance: Instance) -> list[Action]:
    return [a for a in ACTIONS.values() if instance.status in a.when]


# What the ledger names the failures that end a step without spending its retries (the names follow
# the classes: a rename cannot leave this behind).
_PERMANENT = frozenset(error_class_name(cls) for cls in (NonRetryableError, BudgetExceeded))


def failed_for_good(*, status: str, error_name: str, attempts: int, config: dict[str, object]) -> bool:
    """A step that failed without using its retries: it raised NonRetryableError (or a subclass,
    or one given another name), so a retry runs the same code on the same input and fails the
    same way. Only a replay with changed params can go another way."""
    if status != "errored":
        return False
    if error_name.rsplit(".", 1)[-1] in _PERMANENT:
        return True
    retries = config.get("retries")
    limit = retries.get("limit") if isinstance(retries, dict) else None
    return isinstance(limit, int) and attempts <= limit
