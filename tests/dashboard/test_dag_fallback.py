"""A branch that failed while the run went on is marked a fallback in the run graph."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dashboard.selectors.run_layout import dag_ranks
from ingest.engine.models import Step

pytestmark = pytest.mark.pure


def _step(i: int, name: str, status: str, start: int, end: int) -> Step:
    t = datetime(2025, 1, 1, tzinfo=UTC)
    return Step(
        id=i,
        name=name,
        seq=1,
        position=i,
        kind="do",
        status=status,
        attempts=1,
        started_at=t + timedelta(seconds=start),
        ended_at=t + timedelta(seconds=end),
    )


def test_a_failed_parallel_branch_followed_by_more_steps_is_a_fallback():
    steps = [
        _step(1, "fetch-backlinks", "complete", 0, 2),
        _step(2, "fetch-keywords", "errored", 0, 1),
        _step(3, "parallel-store-all", "complete", 3, 4),
    ]
    ranks = dag_ranks(steps, now=datetime(2025, 1, 2, tzinfo=UTC))
    assert [[n.name for n in r.nodes] for r in ranks] == [["fetch-backlinks", "fetch-keywords"], ["parallel-store-all"]]
    assert {n.name: n.fallback for n in ranks[0].nodes} == {"fetch-backlinks": False, "fetch-keywords": True}


def test_the_step_a_run_failed_on_is_not_a_fallback():
    ranks = dag_ranks(
        [_step(1, "a", "complete", 0, 1), _step(2, "b", "errored", 2, 3)], now=datetime(2025, 1, 2, tzinfo=UTC)
    )
    assert [n.fallback for r in ranks for n in r.nodes] == [False, False]
