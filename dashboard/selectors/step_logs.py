"""What a run's steps logged, per attempt: the lines each finished attempt kept (its row's `logs`)
and, while an attempt runs, the lines written so far (its step's `live_log`), as the engine kept
them (bounded, redacted: ingest/engine/runtime/steplog.py). For the run page, the REST API and
the CLI."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, Q

from ingest.engine.models import Attempt, Instance, Step, StepKind

MAX_STEPS = 500  # steps with logs on one page of the API's answer


@dataclass(frozen=True)
class AttemptLog:
    """One attempt's kept lines ({at, level, logger, message}, oldest first); `dropped` counts the
    earlier lines left out by the bound; `running`: the attempt has not ended, more may come."""

    number: int
    running: bool
    lines: list[dict[str, Any]]
    dropped: int

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    @property
    def last(self) -> dict[str, Any] | None:
        return self.lines[-1] if self.lines else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "running": self.running,
            "lines": self.lines,
            "dropped": self.dropped,
            "truncated": self.truncated,
        }


def _kept(value: Any) -> tuple[list[dict[str, Any]], int] | None:
    if not isinstance(value, dict) or not isinstance(value.get("lines"), list):
        return None
    lines = [x for x in value["lines"] if isinstance(x, dict)]
    dropped = value.get("dropped")
    return lines, dropped if isinstance(dropped, int) and dropped > 0 else 0


def attempt_logs(step: Step, attempts: Iterable[Attempt]) -> list[AttemptLog]:
    """The step's attempts that logged, in order; the running attempt's lines last, when its
    live lines are its current attempt's (not an earlier one's left behind)."""
    out: list[AttemptLog] = []
    numbers = set()
    for a in attempts:
        numbers.add(a.number)
        kept = _kept(a.logs)
        if kept is not None:
            out.append(AttemptLog(a.number, False, *kept))
    live = step.live_log
    kept = _kept(live)
    if (
        kept is not None
        and isinstance(live, dict)
        and step.ended_at is None
        and live.get("attempt") == step.attempts
        and step.attempts not in numbers
    ):
        out.append(AttemptLog(step.attempts, True, *kept))
    return out


def step_logs(
    *, instance: Instance, name: str | None = None, seq: int | None = None, after: int | None = None, limit: int = 100
) -> tuple[list[dict[str, Any]], int | None]:
    """The instance's steps that logged, in the order the run asked for them (or the step `name`,
    its `seq`th call when given, whether it logged or not), after the step at position `after`;
    at most `limit` steps, and the position to continue after when there are more."""
    limit = max(1, min(limit, MAX_STEPS))
    steps = Step.objects.filter(instance=instance, kind=StepKind.DO).order_by("position", "id")
    if name is not None:
        steps = steps.filter(name=name)
        if seq is not None:
            steps = steps.filter(seq=seq)
    else:
        logged = Attempt.objects.filter(step_id=OuterRef("pk"), logs__isnull=False)
        steps = steps.filter(Q(live_log__isnull=False) | Q(Exists(logged)))
    if after is not None:
        steps = steps.filter(position__gt=after)
    rows = list(steps[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    attempts: dict[int, list[Attempt]] = {}
    for a in Attempt.objects.filter(step_id__in=[s.id for s in rows]).order_by("step_id", "number"):
        attempts.setdefault(a.step_id, []).append(a)
    found = [
        {
            "name": s.name,
            "seq": s.seq,
            "position": s.position,
            "status": s.status,
            "attempts": [log.as_dict() for log in attempt_logs(s, attempts.get(s.id, []))],
        }
        for s in rows
    ]
    return found, rows[-1].position if more and rows else None
