"""Which history ids are new: pure bookkeeping for the follower, with `now` passed in.

History ids come from a sequence, so a transaction holding id 41 can commit after one holding 42.
Reading only `id > cursor` would skip 41 forever; instead every hole below the cursor is remembered
for `keep_seconds` and re-read until it fills (or expires: a rolled-back insert never fills).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

MAX_TRACKED_GAPS = 2000


@dataclass(frozen=True)
class FeedState:
    cursor: int = 0  # highest id seen
    gaps: dict[int, float] = field(default_factory=dict)  # missing id -> when first missed


def feed_advance(
    state: FeedState, ids: Iterable[int], *, now: float, keep_seconds: float = 10.0
) -> tuple[FeedState, list[int]]:
    """Fold the ids just read into the state; return the new state and the ids not seen before."""
    cursor = state.cursor
    gaps = dict(state.gaps)
    fresh: list[int] = []
    for i in sorted(set(ids)):
        if i > cursor:
            if i - cursor - 1 <= MAX_TRACKED_GAPS:
                for missing in range(cursor + 1, i):
                    gaps[missing] = now
            cursor = i
            fresh.append(i)
        elif i in gaps:
            del gaps[i]
            fresh.append(i)
    gaps = {g: t for g, t in gaps.items() if now - t < keep_seconds}
    if len(gaps) > MAX_TRACKED_GAPS:
        gaps = dict(sorted(gaps.items())[-MAX_TRACKED_GAPS:])
    return FeedState(cursor, gaps), fresh
