"""The state an operator was shown, and what changed since: every form that acts on an instance or
a dead letter carries the version of it the page showed, and the action refuses (409) when the
version moved, saying who or what moved it. A tab left open cannot undo what another tab did.

An instance's version is the id of the newest history row that changes what an operator decides
on: an operator's action (anyone's pause, retry, restart, replay, ...), its creation, or its end
(complete, errored, terminated). Step progress, sleeps and wake-ups do not move it, so a pause
asked of a busy instance is not refused for the steps it ran meanwhile. A dead letter's version is
the time of its last change: dead-lettered (again), or redriven or discarded.

Versions are decimal digits, opaque to clients: they send back what a read gave them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from django.db.models import Q

from ingest.engine.models import (
    FINISHED_STATUSES,
    DeadLetter,
    DeadLetterState,
    History,
    HistoryKind,
    Instance,
)

VERSION_PATTERN = r"^[0-9]{1,20}$"
_VERSION = re.compile(VERSION_PATTERN)
_DECISIVE = Q(kind__in=[HistoryKind.OPERATOR, HistoryKind.INSTANCE_CREATED]) | Q(
    kind=HistoryKind.INSTANCE_STATUS, status__in=sorted(FINISHED_STATUSES)
)
_DONE = {
    "pause": "paused",
    "resume": "resumed",
    "terminate": "terminated",
    "restart": "restarted",
    "retry": "retried",
    "replay": "replayed",
    "fork": "forked",
    "discard": "discarded",
    "approve": "answered an approval of",
}
_ENDED = {
    "complete": "completed",
    "completed_with_errors": "completed with errors",
    "errored": "errored",
    "terminated": "was terminated",
}


def version_valid(raw: str) -> bool:
    return bool(_VERSION.match(raw))


def _clock(at: datetime | None) -> str:
    return f"{at.astimezone(UTC):%H:%M:%S} UTC" if at is not None else "an unknown time"


def instance_version(*, instance_id: str) -> str:
    newest = (
        History.objects.filter(_DECISIVE, instance_id=instance_id).order_by("-id").values_list("id", flat=True).first()
    )
    return str(newest or 0)


def instance_change(*, instance: Instance, version: str) -> str | None:
    """None when `instance` is still at `version`, else a sentence saying what moved it."""
    current = instance_version(instance_id=instance.id)
    if current == version:
        return None
    if int(version) > int(current):
        return (
            f"instance {instance.id} was never at version {version} (it is at {current}); send the "
            "`version` a read of it answered. Nothing was done."
        )
    rows = list(History.objects.filter(_DECISIVE, instance_id=instance.id, id__gt=int(version)).order_by("id")[:4])
    said = []
    for row in rows[:3]:
        if row.kind == HistoryKind.OPERATOR:
            action = str((row.data or {}).get("action", "acted on"))
            said.append(f"{row.actor or 'someone'} {_DONE.get(action, action)} it at {_clock(row.created_at)}")
        elif row.kind == HistoryKind.INSTANCE_STATUS:
            said.append(f"it {_ENDED.get(row.status, row.status)} at {_clock(row.created_at)}")
        else:
            said.append(f"it was created at {_clock(row.created_at)}")
    if len(rows) > 3:
        said.append("and more")
    what = "; ".join(said)
    return (
        f"instance {instance.id} changed since you loaded the page: {what}. It is now "
        f"{instance.status}. Nothing was done; look at it as it is now and decide again."
    )


def dead_letter_version(letter: DeadLetter) -> str:
    return letter_version(created_at=letter.created_at, resolved_at=letter.resolved_at)


def letter_version(*, created_at: datetime, resolved_at: datetime | None) -> str:
    """A dead letter's version from its two times (for rows read as values)."""
    return str(int((resolved_at or created_at).timestamp() * 1_000_000))


def dead_letter_change(letter: DeadLetter, *, version: str) -> str | None:
    """None when `letter` is still at `version`, else a sentence saying what moved it."""
    if dead_letter_version(letter) == version:
        return None
    if letter.state == DeadLetterState.OPEN:
        what = (
            f"it was dead-lettered again at {_clock(letter.created_at)} (its instance failed again: "
            f"{letter.error_name})"
        )
    else:
        what = f"it was {letter.state} by {letter.resolved_by or 'the engine'} at {_clock(letter.resolved_at)}" + (
            f" ({letter.resolution[:200]})" if letter.resolution else ""
        )
    return (
        f"dead letter {letter.id} of {letter.instance_id} changed since you loaded the page: {what}. "
        "Nothing was done; look at it as it is now and decide again."
    )
