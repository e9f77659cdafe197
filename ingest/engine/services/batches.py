"""Bulk actions by query: freeze a selection, start the durable batch that acts on it, step by step.

The rule (docs/bulk-actions.md): a batch acts on exactly the ids its preview froze, inside the
tenants it was taken in. An item whose instance has meanwhile left the action's statuses is
skipped with the engine's reason; nothing outside the frozen set is ever touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Count, QuerySet

from ingest.engine import clock
from ingest.engine.errors import BatchNotConfirmable, EngineError, InvalidSelection
from ingest.engine.models import Batch, BatchItem, BatchItemState, BatchState, Instance
from ingest.engine.services import control
from ingest.engine.services.instances import instance_create
from ingest.engine.sql.batches import batch_items_freeze

if TYPE_CHECKING:
    from ingest.engine.step_api import StepApi

BATCH_WORKFLOW = "runledger-batch"
ACTIONS = ("terminate", "pause", "resume", "retry", "replay")
MAX_ITEMS = 100_000
MAX_RATE = 1000.0
PREVIEW_MAX_AGE = timedelta(hours=1)
CHUNK_SECONDS = 10  # one step acts for about this long at the batch's rate
GROUP = 25  # items acted on per transaction


def batch_preview(
    *, action: str, selection: QuerySet[Instance], tenants: Sequence[str], user_id: str, actor: str, query: str
) -> Batch:
    """Freeze the ids `selection` matches now (within `tenants`) as a previewed batch.

    `selection` is the caller's filtered query; it is narrowed here to `tenants` again, so a
    caller's mistake cannot reach past them. An empty tenant list is refused, not read as all."""
    if action not in ACTIONS:
        raise InvalidSelection(f"unknown bulk action {action!r}; one of {', '.join(ACTIONS)}")
    if not tenants or not all(tenants):
        raise InvalidSelection("a bulk action names the tenants it may act in; nothing was done")
    now = clock.now()
    with transaction.atomic():
        # A user's stale previews go: they can no longer be confirmed.
        Batch.objects.filter(user_id=user_id, state=BatchState.PREVIEWED, created_at__lt=now - PREVIEW_MAX_AGE).delete()
        batch = Batch.objects.create(
            action=action,
            actor=actor,
            user_id=user_id,
            query=query[:4000],
            tenants=sorted(set(tenants)),
            created_at=now,
        )
        rows = selection.filter(tenant__in=list(tenants)).order_by().values("id", "tenant")[: MAX_ITEMS + 1]
        sql, params = rows.query.sql_with_params()
        batch.total = batch_items_freeze(batch_id=batch.id, select_sql=sql, params=params)
        if batch.total > MAX_ITEMS:
            raise InvalidSelection(
                f"the filters match more than {MAX_ITEMS:,} instances; narrow them "
                "(a bulk action acts on at most that many); nothing was done"
            )
        batch.save(update_fields=["total"])
    return batch


@dataclass(frozen=True)
class Started:
    batch: Batch
    instance_ids: list[str]


def batch_confirm(*, batch_id: int, user_id: str, reason: str, rate_per_second: float) -> Started:
    """Start the previewed batch: one `runledger-batch` instance per tenant of its items, the rate
    shared between them. Only the user who previewed may confirm, once, within the hour."""
    if not reason.strip():
        raise InvalidSelection("a bulk action needs a reason (it is kept in each instance's history)")
    if not (0 < rate_per_second <= MAX_RATE):
        raise InvalidSelection(f"rate_per_second must be above 0 and at most {MAX_RATE:g}; got {rate_per_second!r}")
    now = clock.now()
    with transaction.atomic():
        batch = Batch.objects.select_for_update().filter(id=batch_id, user_id=user_id).first()
        if batch is None:
            raise InvalidSelection(f"no bulk action preview {batch_id} of yours; preview again")
        if batch.state != BatchState.PREVIEWED:
            raise BatchNotConfirmable(f"bulk action {batch.id} was already confirmed; nothing more was done")
        if batch.created_at < now - PREVIEW_MAX_AGE:
            raise BatchNotConfirmable("the preview is more than an hour old; preview again")
        if batch.total == 0:
            raise BatchNotConfirmable("the preview matched no instance; nothing was done")
        tenants = sorted(set(BatchItem.objects.filter(batch=batch).values_list("tenant", flat=True)))
        batch.state, batch.reason, batch.confirmed_at = BatchState.RUNNING, reason, now
        batch.rate_per_second = rate_per_second
        batch.save()
        ids = []
        for tenant in tenants:
            inst = instance_create(
                workflow=BATCH_WORKFLOW,
                id=batch_instance_id(batch.id, tenant),
                tenant=tenant,
                params={"batch": batch.id, "action": batch.action, "rate_per_second": rate_per_second / len(tenants)},
                actor=batch.actor,
            )
            ids.append(inst.id)
    return Started(batch, ids)


def batch_instance_id(batch_id: int, tenant: str) -> str:
    return f"batch-{batch_id}-{tenant}"[:100]


def _act(action: str, instance_id: str, *, actor: str, reason: str) -> None:
    match action:
        case "terminate":
            control.instance_terminate(instance_id=instance_id, actor=actor, reason=reason)
        case "pause":
            control.instance_pause(instance_id=instance_id, actor=actor, reason=reason)
        case "resume":
            control.instance_resume(instance_id=instance_id, actor=actor, reason=reason)
        case "retry":
            control.instance_retry(instance_id=instance_id, actor=actor, reason=reason)
        case "replay":
            control.instance_replay(instance_id=instance_id, actor=actor, reason=reason)
        case _:
            raise InvalidSelection(f"unknown bulk action {action!r}")


def batch_chunk(
    *, batch_id: int, tenant: str, rate_per_second: float, sleep: Callable[[float], None] = time.sleep
) -> dict[str, int]:
    """Act on the next pending items of the batch in `tenant`, at most `rate_per_second`, for
    about CHUNK_SECONDS; returns {"done", "skipped", "failed", "remaining"} of this chunk.

    Each item's outcome is written as it happens, so a chunk that re-runs after a crash goes on
    from the first pending item and never acts twice on one instance."""
    batch = Batch.objects.get(id=batch_id)
    limit = max(1, min(1000, int(rate_per_second * CHUNK_SECONDS)))
    items = list(
        BatchItem.objects.filter(batch_id=batch_id, tenant=tenant, state=BatchItemState.PENDING).order_by("id")[:limit]
    )
    counts = {"done": 0, "skipped": 0, "failed": 0}
    reason = f"bulk {batch.action} (batch {batch.id}): {batch.reason}"[:2000]
    started = time.monotonic()
    group = max(1, min(GROUP, int(rate_per_second)))  # a transaction spans about a second of pacing
    for g in range(0, len(items), group):
        # One commit per group of items: a commit per action made the commit's flush the cost of
        # a bulk action. Groups hold their instances' row locks for about a second at most (the
        # pacing). The group's outcomes are written in one statement before its commit, so a
        # crash loses the group's actions and outcomes together, and the re-run acts on them.
        batch_of = items[g : g + group]
        in_tenant = set(
            Instance.objects.filter(id__in=[i.instance_id for i in batch_of], tenant=tenant).values_list(
                "id", flat=True
            )
        )
        with transaction.atomic():
            for n, item in enumerate(batch_of, start=g):
                wait = started + n / rate_per_second - time.monotonic()
                if wait > 0:
                    sleep(wait)
                if item.instance_id in in_tenant:
                    item.state, item.detail = _act_on(batch, item, reason=reason)
                else:
                    item.state, item.detail = BatchItemState.SKIPPED, "no longer in this tenant"
                item.done_at = clock.now()
                counts[item.state] += 1
            BatchItem.objects.bulk_update(batch_of, ["state", "detail", "done_at"])
    remaining = BatchItem.objects.filter(batch_id=batch_id, tenant=tenant, state=BatchItemState.PENDING).count()
    if remaining == 0:
        _finish_if_done(batch_id)
    return {**counts, "remaining": remaining}


def _act_on(batch: Batch, item: BatchItem, *, reason: str) -> tuple[str, str]:
    # No savepoint of its own: every action (ingest.engine.services.control) makes its writes in
    # an atomic block of its own, whose savepoint undoes a refused or failed item alone
    # (tests/dashboard/test_bulk_actions.py: an item failing halfway amid a group).
    try:
        _act(batch.action, item.instance_id, actor=batch.actor, reason=reason)
    except EngineError as exc:  # finished, not paused, not errored: the engine says which
        return BatchItemState.SKIPPED, str(exc)[:500]
    except Exception as exc:  # noqa: BLE001 - one item's fault must not stop the batch
        return BatchItemState.FAILED, f"{type(exc).__name__}: {exc}"[:500]
    return BatchItemState.DONE, ""


def _finish_if_done(batch_id: int) -> None:
    if not BatchItem.objects.filter(batch_id=batch_id, state=BatchItemState.PENDING).exists():
        Batch.objects.filter(id=batch_id, state=BatchState.RUNNING).update(state=BatchState.DONE)


@dataclass(frozen=True)
class Progress:
    total: int
    pending: int
    done: int
    skipped: int
    failed: int

    @property
    def finished(self) -> int:
        return self.done + self.skipped + self.failed

    @property
    def percent(self) -> int:
        return 100 if not self.total else int(100 * self.finished / self.total)


def batch_progress(*, batch_id: int) -> Progress:
    counts = dict(BatchItem.objects.filter(batch_id=batch_id).values_list("state").annotate(n=Count("id")).order_by())
    return Progress(
        total=sum(counts.values()),
        pending=counts.get(BatchItemState.PENDING, 0),
        done=counts.get(BatchItemState.DONE, 0),
        skipped=counts.get(BatchItemState.SKIPPED, 0),
        failed=counts.get(BatchItemState.FAILED, 0),
    )


def batch_run(event: Any, step: StepApi) -> dict[str, Any]:
    """The `runledger-batch` workflow's body: chunks until nothing is pending (each a step, so a
    crash loses at most the chunk's unwritten outcomes, which are then re-tried)."""
    params = event.payload
    batch_id, tenant, rate = int(params["batch"]), str(event.tenant), float(params["rate_per_second"])
    totals = {"done": 0, "skipped": 0, "failed": 0}
    n = 0
    while True:
        n += 1
        result = step.do(
            f"chunk-{n}",
            lambda: batch_chunk(batch_id=batch_id, tenant=tenant, rate_per_second=rate),
            retries={"limit": 5, "delay": "5 seconds", "backoff": "exponential"},
            timeout="30 minutes",
        )
        for key in totals:
            totals[key] += result[key]
        if result["remaining"] == 0:
            return {"batch": batch_id, "tenant": tenant, **totals}
