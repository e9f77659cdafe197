"""LISTEN/NOTIFY: the channels that wake workers and the dashboard's live feed, and their statements."""

from __future__ import annotations

from typing import Any

READY_CHANNEL = "runledger_ready"
HISTORY_CHANNEL = "runledger_history"


def notify(raw: Any, channel: str) -> None:
    """Send an empty notification on `channel` over `raw`, a psycopg connection in autocommit."""
    raw.execute("SELECT pg_notify(%s, '')", (channel,))


def notify_all(raw: Any, channels: list[str]) -> None:
    """`notify` on each of `channels` in one statement: one round trip and one commit (a
    transaction that notifies takes a transaction id and flushes its commit) for all of them."""
    raw.execute("SELECT pg_notify(c, '') FROM unnest(%s::text[]) c", (channels,))


def listen(raw: Any, channel: str) -> None:
    """Subscribe `raw`, a psycopg connection in autocommit, to `channel` (a name of this module)."""
    raw.execute(f"LISTEN {channel}")
