"""WorkflowResult: a workflow's standard result (success, metrics, errors, duration), and how a workflow says it
degraded gracefully.

A workflow whose `run` returns a `WorkflowResult` with errors (or `success=False`) ends in
`completed_with_errors`, a terminal status of its own: the run finished, its output is
there, and the dashboard counts it as a warning, not a failure (no dead letter, no retry).
Any other return value completes the instance as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict


class WorkflowOutput(TypedDict):
    success: bool
    metrics: dict[str, Any]
    errors: list[str]
    duration_ms: int | None


@dataclass(frozen=True)
class WorkflowResult:
    """What a run achieved: `success`, `metrics` (numbers by name), `errors` (strings, or
    exceptions kept as "Name: message"), `duration_ms` (filled in by the engine when None:
    from the instance's start to its end).

    It is degraded, and the instance ends `completed_with_errors`, when `success` is False or
    `errors` is not empty."""

    success: bool = True
    metrics: Mapping[str, Any] = field(default_factory=dict)
    errors: Sequence[str | BaseException] = ()
    duration_ms: int | None = None

    @property
    def degraded(self) -> bool:
        return not self.success or bool(self.errors)

    def as_output(self, *, duration_ms: int | None = None) -> WorkflowOutput:
        """The instance's output: this result as JSON."""
        return {
            "success": self.success,
            "metrics": dict(self.metrics),
            "errors": [_text(e) for e in self.errors],
            "duration_ms": self.duration_ms if self.duration_ms is not None else duration_ms,
        }


def _text(error: str | BaseException) -> str:
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return str(error)
