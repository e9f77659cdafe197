"""The pure decisions: parameters, signals from history rows, throttling, the follower's gaps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.alerts.conditions import (
    Clear,
    Signal,
    budget_level,
    history_signals,
    may_send,
    params_clean,
    rate_exceeded,
    rule_matches,
    summary_due,
)
from ingest.alerts.errors import InvalidRule
from ingest.alerts.follow import advance

pytestmark = pytest.mark.pure
T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def _row(**kw):
    return {
        "kind": "instance.status",
        "status": "errored",
        "workflow": "gong-ingest",
        "tenant": "acme",
        "instance_id": "i1",
        "step_name": "",
        "data": {"error": "Boom", "message": "bad", "step": "fetch"},
        **kw,
    }


def test_params_are_filled_with_defaults_and_checked():
    assert params_clean("dead_letter_growth", {"count": "4"}) == {"workflow": "", "count": 4, "minutes": 15}
    with pytest.raises(InvalidRule, match="takes workflow; not colour"):
        params_clean("instance_failed", {"colour": "red"})
    with pytest.raises(InvalidRule, match="must be a whole number"):
        params_clean("backlog_age", {"minutes": 1.5})
    with pytest.raises(InvalidRule, match="condition 'nope' is unknown"):
        params_clean("nope", {})


def test_a_whole_number_written_with_a_fraction_is_that_number():
    # JSON Schema counts 6576418392.0 as an integer, so the API's schema lets it through.
    assert params_clean("ingress_5xx_rate", {"min_count": 6576418392.0})["min_count"] == 6576418392
    assert params_clean("backlog_age", {"minutes": 25.0}) == {"minutes": 25}
    with pytest.raises(InvalidRule, match="must be a whole number"):
        params_clean("backlog_age", {"minutes": float("inf")})


def test_an_errored_instance_is_a_failure_signal_grouped_by_workflow():
    [signal] = history_signals(_row())
    assert signal == Signal(
        "instance_failed",
        "acme",
        "gong-ingest",
        "gong-ingest failed",
        "gong-ingest",
        {"instance": "i1", "error": "Boom", "message": "bad", "step": "fetch"},
    )


def test_a_completion_clears_both_failure_conditions_of_its_workflow():
    assert history_signals(_row(status="complete", data={})) == [
        Clear("instance_failed", "acme", "gong-ingest"),
        Clear("completed_with_errors", "acme", "gong-ingest"),
    ]


def test_completed_with_errors_keys_off_the_status_string():
    [signal] = history_signals(_row(status="completed_with_errors", data={}))
    assert signal.condition == "completed_with_errors" and signal.group_key == "gong-ingest"


def test_the_alert_delivery_workflow_never_signals():
    assert history_signals(_row(workflow="alert-deliver")) == []


def test_a_pending_approval_row_signals_its_approval():
    [signal] = history_signals(
        _row(kind="approval", status="", data={"approval": 7, "state": "pending", "title": "Ship"})
    )
    assert (signal.condition, signal.group_key, signal.title) == (
        "approval_created",
        "approval:7",
        "approval waits: Ship",
    )


def test_a_rule_for_one_workflow_ignores_the_others():
    signal = history_signals(_row())[0]
    assert rule_matches({"workflow": ""}, signal) and rule_matches({"workflow": "gong-ingest"}, signal)
    assert not rule_matches({"workflow": "salesforce-ingest"}, signal)


def test_one_notification_per_window_then_a_summary_of_the_rest():
    window = timedelta(minutes=10)
    assert may_send(last_sent_at=None, window=window, now=T0)
    assert not may_send(last_sent_at=T0, window=window, now=T0 + timedelta(minutes=9))
    assert may_send(last_sent_at=T0, window=window, now=T0 + window)
    assert not summary_due(unsent=0, last_sent_at=T0, window=window, now=T0 + window)
    assert summary_due(unsent=3, last_sent_at=T0, window=window, now=T0 + window)


def test_budget_levels_and_the_5xx_rate():
    assert budget_level(spent=8, limit=10, percent=80) and not budget_level(spent=7.99, limit=10, percent=80)
    assert budget_level(spent=0, limit=0, percent=100)
    assert rate_exceeded(errors=2, successes=8, percent=20, min_count=2)
    assert not rate_exceeded(errors=1, successes=0, percent=20, min_count=2)
    assert not rate_exceeded(errors=2, successes=9, percent=20, min_count=2)


def test_ids_skipped_by_the_follower_are_read_again_until_they_age_out():
    moved = advance(cursor=10, gaps={}, seen=[11, 14], now=100.0)
    assert moved.cursor == 14 and set(moved.gaps) == {"12", "13"}
    moved = advance(cursor=14, gaps=moved.gaps, seen=[12, 15], now=110.0)
    assert moved.cursor == 15 and set(moved.gaps) == {"13"}
    assert advance(cursor=15, gaps=moved.gaps, seen=[], now=200.0).gaps == {}
