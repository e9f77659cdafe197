"""Pure layout of one run for issue 19: long idle stretches cut from the timeline, a family of
many steps drawn as one node, a step that failed for good told apart from one out of retries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dashboard.actions import failed_for_good
from dashboard.selectors.run_layout import dag_ranks, waterfall_layout
from ingest.engine.models import Step

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _step(name: str, start: float, end: float, *, kind: str = "do", position: int = 1) -> Step:
    return Step(
        id=position,
        name=name,
        seq=1,
        kind=kind,
        status="complete",
        position=position,
        attempts=1,
        started_at=T0 + timedelta(seconds=start),
        ended_at=T0 + timedelta(seconds=end),
    )


def test_a_two_hour_sleep_is_cut_to_a_labelled_mark_and_the_steps_around_it_stay_wide() -> None:
    steps = [
        (_step("fetch", 0, 1), []),
        (_step("nap", 1, 7201, kind="sleep", position=2), []),
        (_step("store", 7201, 7203, position=3), []),
    ]
    laid = waterfall_layout(steps, start=T0, now=T0 + timedelta(hours=3))
    assert [(b.label, b.width) for b in laid.breaks] == [("2h 00m", 8.0)]
    fetch, _, store = laid.rows
    assert fetch.segments[0].width > 25 and store.segments[0].width > 50  # linear, they were 0.01 %
    assert laid.ticks[0] == (0.0, "+0") and laid.ticks[-1][1] == "+2h 00m"


def test_a_run_without_long_idle_time_keeps_its_linear_axis() -> None:
    laid = waterfall_layout([(_step("a", 0, 10), []), (_step("b", 12, 20, position=2), [])], start=T0, now=T0)
    assert laid.breaks == [] and [t for _, t in laid.ticks] == ["+0.0s", "+5.0s", "+10.0s", "+15.0s", "+20.0s"]


def test_22_steps_of_one_family_in_three_ranks_are_one_group_node() -> None:
    fan = [
        _step(f"persist-facts-{k}", 10 + (k - 1) // 9 * 10, 19 + (k - 1) // 9 * 10, position=k + 1)
        for k in range(1, 23)
    ]
    ranks = dag_ranks([_step("fetch", 0, 5)] + fan + [_step("done", 50, 51, position=40)], now=T0)
    assert [len(r.nodes) for r in ranks] == [1, 22, 1]
    group = ranks[1].group
    assert group is not None and group.family == "persist-facts" and group.parallel
    assert group.tally == [("complete", 22)] and ranks[0].group is None


def test_a_step_that_failed_for_good_is_told_apart_from_one_out_of_retries() -> None:
    config = {"retries": {"limit": 2}}
    assert failed_for_good(status="errored", error_name="NonRetryableError", attempts=1, config=config)
    assert failed_for_good(status="errored", error_name="app.errors.BadAccount", attempts=1, config=config)
    assert not failed_for_good(status="errored", error_name="TimeoutError", attempts=3, config=config)
    assert not failed_for_good(status="complete", error_name="", attempts=1, config=config)
