"""The fold from history rows to counters: labels stay bounded, buckets and sums are right."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from dashboard.observability import tally
from dashboard.observability.models import MetricTally
from dashboard.observability.tally import Row, fold, known_steps, step_label
from ingest.engine.models import History

T = datetime(2026, 1, 1, tzinfo=UTC)


def _attempt(i: int, workflow: str, step: str, ms: float = 5.0) -> Row:
    return Row(i, "step.completed", "", workflow, "acme", step, {"attempt": 1, "ms": ms}, T, None)


@pytest.mark.pure
def test_numbered_steps_and_occurrences_share_one_label() -> None:
    assert step_label("persist-facts-3") == "persist-facts-N"
    assert step_label("persist-facts-3#2") == "persist-facts-N"
    assert step_label("llm-extract#4") == "llm-extract"
    assert step_label("x" * 400) == "x" * 120


@pytest.mark.pure
def test_a_workflow_past_its_step_label_cap_counts_new_names_as_other() -> None:
    values: dict[tally.Series, float] = {}
    rows = [_attempt(i, "wide", f"step{chr(65 + i % 26)}{i // 26}x") for i in range(tally.MAX_STEPS_PER_WORKFLOW + 50)]
    fold(rows, into=values, steps={})
    labels = {labels[1] for (metric, labels) in values if metric == "attempts"}
    assert len(labels) == tally.MAX_STEPS_PER_WORKFLOW + 1
    assert values[("attempts", ("wide", "other"))] == 50
    # A name that already has a series keeps it after the cap is reached.
    again: dict[tally.Series, float] = {}
    fold([_attempt(999, "wide", "stepA0x")], into=again, steps=known_steps(values))
    assert again == {
        ("attempts", ("wide", "stepA0x")): 1.0,
        ("step_seconds", ("wide", "stepA0x", "0")): 1.0,
        ("step_seconds_sum", ("wide", "stepA0x")): 0.005,
        ("step_seconds_count", ("wide", "stepA0x")): 1.0,
    }


@pytest.mark.pure
def test_instance_durations_fall_in_their_bucket_and_sum() -> None:
    values: dict[tally.Series, float] = {}
    fold(
        [
            Row(1, "instance.status", "errored", "w", "t", "", {}, T + timedelta(seconds=45), T),
            Row(2, "instance.status", "running", "w", "t", "", {}, T, T),
            Row(3, "instance.status", "complete", "w", "t", "", {}, T, None),
        ],
        into=values,
        steps={},
    )
    assert values[("finished", ("w", "errored"))] == 1
    assert values[("finished", ("w", "complete"))] == 1
    assert values[("instance_seconds", ("w", "errored", str(tally.INSTANCE_BUCKETS.index(60.0))))] == 1
    assert values[("instance_seconds_sum", ("w", "errored"))] == 45
    assert ("instance_seconds_count", ("w", "complete")) not in values  # its instance is gone


def test_only_settled_rows_are_stored_and_the_cursor_stops_before_the_first_unsettled(db: object) -> None:
    now = timezone.now()
    old = History.objects.create(
        workflow="w", tenant="t", kind="instance.created", created_at=now - timedelta(minutes=5)
    )
    History.objects.create(workflow="w", tenant="t", kind="instance.created", created_at=now)
    History.objects.create(workflow="w", tenant="t", kind="instance.created", created_at=now - timedelta(minutes=5))
    assert tally.tally_advance(now=now) == 1
    cursor, values = tally.tally_read()
    assert cursor == old.id and values == {("started", ("w",)): 1.0}
    # A read still counts all three: the unsettled ones are folded in memory.
    assert tally.tally_snapshot().values[("started", ("w",))] == 3
    assert tally.tally_advance(now=now + timedelta(minutes=1)) == 2
    assert MetricTally.objects.get(metric="started").value == 3
    assert tally.tally_snapshot().values[("started", ("w",))] == 3
