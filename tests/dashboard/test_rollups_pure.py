"""The rollups' pure parts: duration histograms, what history rows dirty, the cursor's holes, and
how a window is cut between daily rows, hourly rows and the ledger."""

from __future__ import annotations

import math
import random
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from dashboard.rollups import days, hist
from dashboard.rollups.dirty import (
    HOLE_KEEP_SECONDS,
    SKEW,
    Dirty,
    cursor_advance,
    dirty_of,
    history_span_hours,
    hole_runs_from_json,
    holes_from_json,
    holes_to_json,
    hour_of,
    id_runs,
    touched,
)
from dashboard.rollups.reads import RollupView, split
from dashboard.rollups.sql import Touch

pytestmark = pytest.mark.pure

H = timedelta(hours=1)
T = datetime(2025, 3, 10, 0, 0, tzinfo=UTC)


def exact_percentile(values: list[float], q: float) -> float:
    """percentile_cont, as PostgreSQL computes it."""
    values = sorted(values)
    rank = (len(values) - 1) * q
    lo = int(rank)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (rank - lo)


@pytest.mark.parametrize("seed", range(40))
def test_a_p95_from_merged_histograms_is_within_the_stated_error_of_the_exact_one(seed):
    rng = random.Random(seed)
    values = [rng.lognormvariate(rng.uniform(0, 10), rng.uniform(0.1, 2)) for _ in range(rng.randint(1, 400))]
    # Split across "hours" and merged back, as the pages do.
    parts: list[list[int]] = []
    for k in range(0, len(values), 37):
        counts: hist.Counts = {}
        for v in values[k : k + 37]:
            counts[hist.bin_of(v)] = counts.get(hist.bin_of(v), 0) + 1
        parts.append(hist.pack(counts))
    merged: hist.Counts = {}
    for p in parts:
        hist.unpack_into(merged, p)
    for q in (0.5, 0.95, 0.99):
        exact = exact_percentile(values, q)
        got = hist.percentile(merged, q)
        assert got is not None
        assert abs(got - exact) <= hist.RELATIVE_ERROR * exact + 0.5, (q, exact, got)


def test_every_duration_falls_inside_its_bins_bounds():
    for ms in (0.0, 0.4, 1.0, 1.09, 2.0, 999.9, 1000.0, 3.6e6, 1.3e8, 1e12):
        low, high = hist.bin_bounds(hist.bin_of(ms))
        assert low <= ms < high or (ms < 1 and low == 0.0)


def test_packing_keeps_the_counts_and_drops_leading_empty_bins():
    counts = {30: 2, 33: 1, 31: 0}
    packed = hist.pack(counts)
    assert packed == [30, 2, 0, 0, 1]
    assert hist.unpack_into({33: 4}, packed) == {30: 2, 33: 5}
    assert hist.pack({}) == [] and hist.percentile({}, 0.95) is None


def test_history_rows_dirty_the_hours_of_the_instances_steps_and_the_cost_hours():
    rows = [
        Touch(10, "a", "step.completed", T + 5 * H + timedelta(minutes=3), False),
        Touch(11, "b", "cost.recorded", T + 7 * H, False),
        Touch(12, None, "budget", T + 9 * H, False),
    ]
    t = touched(rows)
    assert t.step_instances == {"a", "b"} and t.cost_instances == {"b"}
    assert t.cost_hours == {T + 7 * H}
    # A step of "a" that started two days earlier and completed now: its start hour is dirty.
    d = dirty_of(t, step_hours=[T - 48 * H + timedelta(minutes=59)], span_hours=[])
    assert d.step_hours == {T + 5 * H, T + 7 * H, T - 48 * H}


def test_an_operator_row_dirties_every_hour_of_the_instances_history_padded_for_skew():
    t = touched([Touch(20, "a", "operator", T + 30 * H, False)])
    assert t.span_instances == {"a"}
    span = history_span_hours([("a", T + 2 * H + timedelta(minutes=58), False), ("a", T + 30 * H, False)])
    assert min(span) == hour_of(T + 2 * H + timedelta(minutes=58) - SKEW) == T + 2 * H
    assert max(span) == hour_of(T + 30 * H + SKEW) == T + 30 * H
    assert len(span) == 29


def test_a_hole_below_the_cursor_is_watched_until_it_fills():
    cursor, holes = cursor_advance(5, {}, [6, 8, 9], now=100.0, horizon=None)
    assert cursor == 9 and set(holes) == {7}
    cursor, holes = cursor_advance(cursor, holes, [7, 10], now=101.0, horizon=None)
    assert cursor == 10 and holes == {}


def test_a_hole_expires_after_a_while_without_postgresql_and_only_once_its_transactions_ended_on_it():
    _, holes = cursor_advance(1, {}, [3], now=100.0, horizon=None)
    assert cursor_advance(3, holes, [], now=100.0 + HOLE_KEEP_SECONDS + 1, horizon=None)[1] == {}
    # On PostgreSQL: seen when the next transaction id was 500; a transaction below 500 still runs.
    _, holes = cursor_advance(1, {}, [3], now=100.0, horizon=(490, 500))
    later = 100.0 + HOLE_KEEP_SECONDS + 60
    assert set(cursor_advance(3, holes, [], now=later, horizon=(499, 510))[1]) == {2}
    assert cursor_advance(3, holes, [], now=later, horizon=(500, 510))[1] == {}


def test_holes_seen_at_once_are_stored_as_one_run_and_read_back_whole():
    holes = {i: (100.0, 500) for i in range(10, 9010)} | {9012: (100.0, 500), 9013: (130.0, 520), 9015: (130.0, 520)}
    stored = holes_to_json(holes)
    assert stored == {"10-9009": [100.0, 500], "9012": [100.0, 500], "9013": [130.0, 520], "9015": [130.0, 520]}
    assert holes_from_json(stored) == holes
    assert hole_runs_from_json(stored) == id_runs(holes) == [(10, 9009), (9012, 9013), (9015, 9015)]
    # A state row written before runs were stored: one id per key.
    assert holes_from_json({"7": [1.0, 2], "9": [1.0, 2]}) == {7: (1.0, 2), 9: (1.0, 2)}
    assert hole_runs_from_json({"7": [1.0, 2], "9": [1.0, 2]}) == [(7, 7), (9, 9)]


def _covered_once(s, since, until):
    """Each instant of [since, until) is in exactly one of s.days, s.hours, s.raw."""
    tz = days.zone()
    pieces = [(h, h + H) for d in s.days for h in days.hours_of_day(d, tz)]
    pieces += [(a, b) for a, b in s.hours] + [(a, b if b is not None else until) for a, b in s.raw]
    pieces.sort()
    assert pieces[0][0] == since and pieces[-1][1] == until
    for (_, b1), (a2, _) in zip(pieces, pieces[1:], strict=False):
        assert b1 == a2, (b1, a2)


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "Asia/Kolkata"])
def test_a_window_is_covered_once_with_dirty_and_unclosed_hours_and_its_edges_left_to_the_ledger(settings, zone):
    settings.TIME_ZONE = zone
    closed = T + 100 * H
    dirty = frozenset({T + 40 * H, T + 41 * H, T + 77 * H})
    view = RollupView(closed, Dirty(step_hours=dirty), True, True)
    since = T + 3 * H + timedelta(minutes=17)
    until = T + 110 * H + timedelta(minutes=5)
    s = split(view, since=since, until=until, dirty_hours=dirty)
    _covered_once(s, since, until)
    assert s.days, "whole clean days are read from the daily rows"
    assert all(h not in dirty and h < closed for a, b in s.hours for h in (a, b - H))
    raw_hours = {hour_of(a) for a, _ in s.raw}
    assert dirty <= {hour_of(a + k * H) for a, b in s.raw for k in range(int(((b or until) - a) / H) + 1)}
    assert hour_of(since) in raw_hours and s.raw[-1] == (closed, until)
    for d in s.days:  # no day that holds a dirty hour
        assert not set(days.hours_of_day(d, ZoneInfo(zone))) & dirty
    hourly = split(view, since=since, until=until, dirty_hours=dirty, use_days=False)
    assert hourly.days == [] and hourly.raw == s.raw


def test_without_a_rollup_the_whole_window_is_the_ledgers():
    s = split(RollupView(None, Dirty(), False, False), since=T, until=None, dirty_hours=frozenset())
    assert s.raw == [(T, None)] and not s.hours and not s.days


def test_a_day_is_the_hours_that_start_on_it_even_across_daylight_saving_and_half_hour_zones():
    berlin = ZoneInfo("Europe/Berlin")
    assert len(days.hours_of_day(date(2025, 3, 30), berlin)) == 23
    assert len(days.hours_of_day(date(2025, 10, 26), berlin)) == 25
    kolkata = days.hours_of_day(date(2025, 3, 10), ZoneInfo("Asia/Kolkata"))
    assert len(kolkata) == 24 and kolkata[0] == datetime(2025, 3, 9, 19, 0, tzinfo=UTC)
    assert all(math.isclose((b - a).total_seconds(), 3600) for a, b in zip(kolkata, kolkata[1:], strict=False))
