from __future__ import annotations

import pytest

from ingest.engine.clock import now
from ingest.engine.sql import steps as sql_steps
from ingest.engine.worker.turns import run_until_idle
from ingest.engine.writes import commits


@pytest.fixture
def drain():
    """Run everything due now (and, with advance_clock, everything that becomes due)."""

    def _drain(*, advance_clock: bool = False, max_turns: int = 10_000) -> int:
        return run_until_idle(advance_clock=advance_clock, max_turns=max_turns)

    return _drain


@pytest.fixture
def group_commits(monkeypatch):
    """Fresh group commits for this test, (group, express), closed afterwards."""
    fresh = commits.GroupCommit(), commits.GroupCommit()
    monkeypatch.setattr(commits, "group", fresh[0])
    monkeypatch.setattr(commits, "express", fresh[1])
    yield fresh
    for group_commit in fresh:
        group_commit.close()


@pytest.fixture
def step_completion():
    """Builds a step's first, successful attempt, started and ended now, as the group commit
    takes it: `step_completion(instance_id, name, token=..., position=0, result=None)` (result:
    its JSON; by default the step's name)."""

    def build(
        instance_id: str, name: str, *, token: str, position: int = 0, result: str | None = None
    ) -> sql_steps.Completion:
        t = now()
        row = sql_steps.StepRow(
            iid=instance_id,
            name=name,
            seq=1,
            position=position,
            kind="do",
            config="{}",
            sensitive=False,
            has_rollback=False,
            label=name,
        )
        return sql_steps.Completion(
            row=row,
            token=token,
            now=t,
            started=t,
            attempt=1,
            result=f'"{name}"' if result is None else result,
            worker="test-worker",
            with_start=True,
        )

    return build
