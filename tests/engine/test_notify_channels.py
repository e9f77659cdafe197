"""Wake-ups on PostgreSQL: the notifier thread sends every pending channel in one statement."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.engine.sql import channels as sql_channels
from ingest.engine.writes import notify

pytestmark = [pytest.mark.db, pytest.mark.postgres]


def test_every_pending_channel_is_notified_in_one_statement_and_each_listener_hears_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import psycopg

    from tests.conftest import PG_URL

    statements: list[Any] = []
    monkeypatch.setattr(notify.pg, "connection_string", lambda: PG_URL)
    channels = {sql_channels.READY_CHANNEL, sql_channels.HISTORY_CHANNEL}
    with psycopg.connect(PG_URL, autocommit=True) as listener:
        for channel in sorted(channels):
            sql_channels.listen(listener, channel)
        sender = psycopg.connect(PG_URL, autocommit=True)
        sender._runledger_epoch = notify.pg.connections_epoch()
        real = sender.execute
        sender.execute = lambda *a, **k: statements.append(a[0]) or real(*a, **k)  # type: ignore[method-assign]
        try:
            notify._send(sender, channels)
        finally:
            sender.close()
        heard = {n.channel for n in listener.notifies(timeout=30, stop_after=2)}  # ends at the second
    assert heard == channels
    assert len(statements) == 1
