"""Shared by the operations selectors: money constants and the time windows."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

ZERO = Decimal("0")
MICRO = Decimal("0.000001")  # the ledger stores money with 6 decimals
WINDOWS: dict[str, timedelta] = {
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}


def window_start(window: str, *, now: datetime) -> datetime:
    return now - WINDOWS.get(window, WINDOWS["24h"])
