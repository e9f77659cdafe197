from __future__ import annotations

import pytest

from ingest.engine.worker import run_until_idle


@pytest.fixture
def drain():
    """Run everything due now (and, with advance_clock, everything that becomes due)."""

    def _drain(*, advance_clock: bool = False, max_turns: int = 10_000) -> int:
        return run_until_idle(advance_clock=advance_clock, max_turns=max_turns)

    return _drain
