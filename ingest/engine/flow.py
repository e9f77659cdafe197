"""Flow control at claim time: per-workflow and per-key concurrency limits."""

from __future__ import annotations

from datetime import datetime

from ingest.engine.sql import Claimed


def admit(claimed: list[Claimed], *, owner: str, token: str, now: datetime) -> list[Claimed]:
    return claimed
