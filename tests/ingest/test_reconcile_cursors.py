"""The pulls' cursors: the window a pull reads (pure), and the writes that let any number of pulls
overlap on any number of workers without a cursor moving back or over what was not started."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.pipelines.cursors import Window, cursor_advance, cursor_claim, cursor_fail, pull_window
from ingest.pipelines.models import ConnectionCursor
from ingest.pipelines.services import connection_upsert

NOW = datetime(2026, 3, 9, 12, 0, tzinfo=UTC)
LOOKBACK, MOST = timedelta(minutes=10), timedelta(days=1)
HOLD = timedelta(minutes=15)


@pytest.mark.pure
def test_a_pull_reads_from_its_cursor_less_the_lookback_to_now() -> None:
    assert pull_window(cursor=NOW - timedelta(minutes=5), now=NOW, lookback=LOOKBACK, max_window=MOST) == Window(
        NOW - timedelta(minutes=15), NOW
    )


@pytest.mark.pure
def test_the_first_pull_reads_only_the_lookback_and_a_late_cursor_catches_up_a_window_at_a_time() -> None:
    assert pull_window(cursor=None, now=NOW, lookback=LOOKBACK, max_window=MOST) == Window(NOW - LOOKBACK, NOW)
    behind = NOW - timedelta(days=3)
    first = pull_window(cursor=behind, now=NOW, lookback=LOOKBACK, max_window=MOST)
    assert first == Window(behind - LOOKBACK, behind - LOOKBACK + MOST)
    second = pull_window(cursor=first.end, now=NOW, lookback=LOOKBACK, max_window=MOST)
    assert second.start < first.end < second.end  # overlapping, and moving on
    # A cursor ahead of the clock (another machine's clock) reads up to now, never past it.
    assert pull_window(cursor=NOW + timedelta(hours=1), now=NOW, lookback=LOOKBACK, max_window=MOST).end == NOW
    with pytest.raises(ValueError, match="must be longer than its lookback"):
        pull_window(cursor=None, now=NOW, lookback=MOST, max_window=MOST)


@pytest.fixture
def connection_id(db: None) -> int:
    return connection_upsert(tenant="acme", kind="gong", key="k", secret="s").pk


@pytest.mark.django_db
def test_one_pull_holds_a_connection_and_the_same_holder_may_claim_again(connection_id: int) -> None:
    first = cursor_claim(connection_id=connection_id, holder="reconcile-acme-1", now=NOW, hold=HOLD)
    assert first is not None and first.cursor is None
    assert cursor_claim(connection_id=connection_id, holder="reconcile-acme-2", now=NOW, hold=HOLD) is None
    # The first instance's step, run again after its worker died, takes its own hold back.
    assert cursor_claim(connection_id=connection_id, holder="reconcile-acme-1", now=NOW, hold=HOLD) is not None
    # A hold whose pull never reported lapses; then another instance pulls.
    later = NOW + HOLD + timedelta(seconds=1)
    assert cursor_claim(connection_id=connection_id, holder="reconcile-acme-2", now=later, hold=HOLD) is not None


@pytest.mark.django_db
def test_the_cursor_only_moves_forward_whatever_order_overlapping_pulls_finish_in(connection_id: int) -> None:
    newer, older = Window(NOW - LOOKBACK, NOW), Window(NOW - 2 * LOOKBACK, NOW - LOOKBACK)
    cursor_claim(connection_id=connection_id, holder="a", now=NOW, hold=HOLD)
    cursor_advance(connection_id=connection_id, holder="a", window=newer, listed=7, started=2, now=NOW)
    cursor_advance(connection_id=connection_id, holder="b", window=older, listed=3, started=0, now=NOW)  # a slow one

    row = ConnectionCursor.objects.get(pk=connection_id)
    assert row.cursor == NOW and (row.holder, row.held_until) == ("", None)


@pytest.mark.django_db
def test_a_failed_pull_keeps_the_cursor_records_its_error_redacted_and_frees_the_connection(connection_id: int) -> None:
    from ingest.engine import redaction

    cursor_claim(connection_id=connection_id, holder="a", now=NOW, hold=HOLD)
    cursor_advance(
        connection_id=connection_id, holder="a", window=Window(NOW - LOOKBACK, NOW), listed=1, started=1, now=NOW
    )
    redaction.remember("sk-live-secret-value-123")
    cursor_claim(connection_id=connection_id, holder="b", now=NOW, hold=HOLD)
    cursor_fail(connection_id=connection_id, holder="b", error="HTTP 500 with sk-live-secret-value-123", now=NOW)

    row = ConnectionCursor.objects.get(pk=connection_id)
    assert row.cursor == NOW and row.last_success_at == NOW and row.last_error_at == NOW
    assert "HTTP 500" in row.last_error and "sk-live-secret-value-123" not in row.last_error
    assert cursor_claim(connection_id=connection_id, holder="c", now=NOW, hold=HOLD) is not None
