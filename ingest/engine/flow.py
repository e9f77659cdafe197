"""Flow control: concurrency limits per workflow and key, start rate limits, workflow timeouts.

The limits are enforced inside the claim, so they hold across any number of worker processes:
`claim` below runs the statements of sql/flow.py and sql/claim.py in the worker's claim
transaction and decides, with the pure functions of this module, what to persist. Workflows without limits take the
fast path (one statement, as before); only workflows that declare limits pay for the per-key
ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from ingest.engine.sql import claim as sql_claim
from ingest.engine.sql import flow as sql_flow
from ingest.engine.sql.claim import Claimed
from ingest.engine.sql.flow import FlowGroup, FlowLimit
from ingest.engine.workflow import Workflow, registered_workflows

# ---- pure decisions ----------------------------------------------------------------------


def claim_limits(workflows: Sequence[type[Workflow]], *, now: datetime) -> list[FlowLimit]:
    """The limits the claim must honour, one per workflow that declares any (a concurrency,
    a rate, or a concurrency_key to be fair across), as of `now`. The caps of single key values
    (the workflow's `concurrency_overrides`, the operators' ConcurrencyLimit rows) are applied
    inside the claim's SQL, so a keyed workflow's cap is per key: its own, else the workflow's,
    else none."""
    limits = []
    for cls in workflows:
        concurrency = getattr(cls, "concurrency", None)
        rate = getattr(cls, "_rate", None)
        # A concurrency_key alone asks for fairness without a cap: the claim's round robin
        # across the key's values (an uncapped group's slots are never short).
        if concurrency is None and rate is None and not getattr(cls, "concurrency_key", None):
            continue
        limits.append(
            FlowLimit(
                workflow=cls.name,
                concurrency=concurrency,
                rate=None if rate is None else rate[0],
                since=None if rate is None else now - rate[1],
                overrides=tuple(sorted((cls.concurrency_overrides or {}).items())),
            )
        )
    return sorted(limits, key=lambda limit: limit.workflow)


def rate_next_slot(starts: Sequence[datetime], *, limit: int, period: timedelta, now: datetime) -> datetime | None:
    """When the next start is allowed under `limit` starts per sliding `period`; None: now.

    `starts` are the start times already in the ledger. A start leaves the window `period`
    after it happened, so with m ≥ limit starts in the window the next slot opens when the
    (m - limit + 1)-th oldest of them leaves it.
    """
    window = sorted(s for s in starts if s > now - period)
    if len(window) < limit:
        return None
    return window[len(window) - limit] + period


def deadline(*, started_at: datetime | None, timeout: timedelta | None) -> datetime | None:
    """When an instance started at `started_at` runs out of its workflow-level `timeout`."""
    if started_at is None or timeout is None:
        return None
    return started_at + timeout


def timed_out(*, deadline: datetime | None, now: datetime) -> bool:
    return deadline is not None and now >= deadline


def cap_wake(until: datetime | None, *, deadline: datetime | None) -> datetime | None:
    """A suspended instance's wake-up, brought forward to its deadline so it wakes to fail."""
    if deadline is None:
        return until
    return deadline if until is None or until > deadline else until


# ---- the claim -------------------------------------------------------------------------------


def claim(
    *,
    owner: str,
    token: str,
    limit: int,
    now: datetime,
    lease_until: datetime,
    limits: Sequence[FlowLimit] | None = None,
) -> list[Claimed]:
    """Lease up to `limit` runnable instances, honouring every workflow's flow limits.

    Runnable: due (`ready_at <= now`), not paused or finished, and holding no live lease — so an
    instance whose worker died becomes runnable again when its lease expires. Call inside a
    transaction. Capped workflows first: their candidates are bounded by their limits, so they cannot
    starve the others, while an unbounded backlog of unlimited work would starve them if it
    went first. The remaining slots go to the fast path, which skips limited workflows, then to
    the workflows that are fair across their keys without a cap (round robin, unbounded: a
    backlog of theirs must not starve the small unlimited ones, alert deliveries and hooks).
    """
    if limits is None:
        limits = claim_limits(registered_workflows(), now=now)
    if not limits:
        return sql_claim.claim_unlimited(owner=owner, token=token, limit=limit, now=now, lease_until=lease_until)
    capped = [lim for lim in limits if lim.concurrency is not None or lim.rate is not None]
    fair = [lim for lim in limits if lim.concurrency is None and lim.rate is None]
    claimed = _claim_groups(capped, owner=owner, token=token, limit=limit, now=now, lease_until=lease_until)
    if len(claimed) < limit:
        claimed += sql_claim.claim_unlimited(
            owner=owner,
            token=token,
            limit=limit - len(claimed),
            now=now,
            lease_until=lease_until,
            exclude=[lim.workflow for lim in limits],
        )
    if len(claimed) < limit:
        claimed += _claim_groups(
            fair, owner=owner, token=token, limit=limit - len(claimed), now=now, lease_until=lease_until
        )
    return claimed


def uncapped(limits: Sequence[FlowLimit]) -> bool:
    """No limit caps anything: every limit only asks for fairness across its keys, so the claim
    may take the fast path for the rest and the fair groups after it (`claim_fair`)."""
    return all(lim.concurrency is None and lim.rate is None for lim in limits)


def claim_fair(
    limits: Sequence[FlowLimit], *, owner: str, token: str, limit: int, now: datetime, lease_until: datetime
) -> list[Claimed]:
    """The fair workflows' part of a claim whose limits are all uncapped: round robin over their
    (workflow, key) groups. Call inside a transaction, after the fast path excluding them."""
    return _claim_groups(limits, owner=owner, token=token, limit=limit, now=now, lease_until=lease_until)


def _claim_groups(
    limits: Sequence[FlowLimit], *, owner: str, token: str, limit: int, now: datetime, lease_until: datetime
) -> list[Claimed]:
    """The limited claim over these workflows' (workflow, key) groups, in fairness order."""
    if not limits:
        return []
    groups = sql_flow.claim_groups(limits=limits, now=now, max_groups=limit)
    if not groups:
        return []
    claimed = sql_flow.claim_limited(
        groups=groups, limits=limits, owner=owner, token=token, limit=limit, now=now, lease_until=lease_until
    )
    _defer_over_rate(groups, limits, now=now)
    return claimed


def _defer_over_rate(groups: Sequence[FlowGroup], limits: Sequence[FlowLimit], *, now: datetime) -> None:
    """Push the queued instances of a group that used up its start rate to its next slot.

    Runs under the group's claim lock, after this claim's own starts, so the count includes
    them. Deferring (rather than skipping) lets idle workers and `run_until_idle` sleep until
    the slot opens instead of polling.
    """
    by_workflow = {lim.workflow: lim for lim in limits}
    for group in groups:
        lim = by_workflow[group.workflow]
        if lim.rate is None or lim.since is None:
            continue
        starts = sql_flow.rate_window_starts(workflow=group.workflow, key=group.key, since=lim.since)
        until = rate_next_slot(starts, limit=lim.rate, period=now - lim.since, now=now)
        if until is not None:
            sql_flow.rate_defer(workflow=group.workflow, key=group.key, until=until, now=now)
