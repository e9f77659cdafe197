"""Retention: finished instances older than their workflow's `retention_days` are written to
gzip-compressed JSON lines and then deleted, in small batches.

Before that, every round drops the call journal of the instances that have finished
(`journal_prune`): the answers their steps' paid calls were given are kept only while a retry
could need them (ingest/engine/runtime/journal.py); they are not archived.

Never purged: an instance with an open dead letter (an operator has yet to decide), one with a
pending approval, and one with an unfinished child (the child's parent link must hold). Each batch
is one short transaction that skips rows another transaction holds (FOR UPDATE SKIP LOCKED on
PostgreSQL), so workers and operators never wait on it. A batch's lines are written and flushed
to disk before its rows are deleted: a crash in between leaves the instances in the ledger and a
second copy of their lines in the archive, never an instance in neither.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet

from ingest.engine.errors import UnknownWorkflow
from ingest.engine.models import (
    FINISHED_STATUSES,
    ApprovalRequest,
    ApprovalState,
    Attempt,
    CallJournal,
    DeadLetter,
    DeadLetterState,
    History,
    Instance,
    RetentionBatch,
    Step,
)
from ingest.engine.workflow import Workflow, get_workflow

DEFAULT_DAYS = Workflow.retention_days
BATCH = 200
JOURNAL_BATCH = 1000


def retention_days(workflow: str) -> int:
    """The workflow's `retention_days`, or the default for a workflow no longer registered."""
    try:
        return get_workflow(workflow).retention_days
    except UnknownWorkflow:
        return DEFAULT_DAYS


def retention_cutoff(*, days: int, now: datetime) -> datetime:
    """Instances that ended before this are due."""
    return now - timedelta(days=days)


def retention_due(*, workflow: str, cutoff: datetime) -> QuerySet[Instance]:
    """Finished instances of `workflow` that ended before `cutoff` and may go."""
    open_letter = DeadLetter.objects.filter(instance_id=OuterRef("pk"), state=DeadLetterState.OPEN)
    waiting = ApprovalRequest.objects.filter(instance_id=OuterRef("pk"), state=ApprovalState.PENDING)
    busy_child = Instance.objects.filter(parent_id=OuterRef("pk")).exclude(status__in=FINISHED_STATUSES)
    return Instance.objects.filter(workflow=workflow, status__in=FINISHED_STATUSES, ended_at__lt=cutoff).filter(
        ~Q(Exists(open_letter)) & ~Q(Exists(waiting)) & ~Q(Exists(busy_child))
    )


def _lines(ids: list[str]) -> list[dict[str, Any]]:
    """Each instance with its steps (and their attempts), history, dead letter and approvals."""
    steps: dict[str, list[dict[str, Any]]] = {}
    attempts: dict[int, list[dict[str, Any]]] = {}
    for a in Attempt.objects.filter(step__instance_id__in=ids).order_by("step_id", "number").values():
        attempts.setdefault(a["step_id"], []).append(dict(a))
    for s in Step.objects.filter(instance_id__in=ids).order_by("position", "id").values():
        steps.setdefault(s["instance_id"], []).append({**s, "attempts": attempts.get(s["id"], [])})
    history: dict[str, list[dict[str, Any]]] = {}
    for h in History.objects.filter(instance_id__in=ids).order_by("id").values():
        history.setdefault(h["instance_id"], []).append(dict(h))
    letters = {d["instance_id"]: d for d in DeadLetter.objects.filter(instance_id__in=ids).values()}
    approvals: dict[str, list[dict[str, Any]]] = {}
    for r in ApprovalRequest.objects.filter(instance_id__in=ids).order_by("id").values():
        approvals.setdefault(r["instance_id"], []).append(dict(r))
    return [
        {
            "instance": i,
            "steps": steps.get(i["id"], []),
            "history": history.get(i["id"], []),
            "dead_letter": letters.get(i["id"]),
            "approvals": approvals.get(i["id"], []),
        }
        for i in Instance.objects.filter(id__in=ids).order_by("id").values()
    ]


def _append(path: Path, lines: list[dict[str, Any]]) -> None:
    """Append one gzip member (a gzip file may hold several; readers see one stream)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(json.dumps(line, cls=DjangoJSONEncoder, sort_keys=True) + "\n" for line in lines)
    with open(path, "ab") as f:
        f.write(gzip.compress(body.encode()))
        f.flush()
        os.fsync(f.fileno())


def retention_purge_batch(*, workflow: str, now: datetime, archive_dir: Path, batch: int = BATCH) -> int:
    """Archive and delete one batch of `workflow`'s due instances; how many went (0: none due)."""
    cutoff = retention_cutoff(days=retention_days(workflow), now=now)
    with transaction.atomic():
        due = retention_due(workflow=workflow, cutoff=cutoff).order_by("ended_at", "id")
        if connection.features.has_select_for_update_skip_locked:
            due = due.select_for_update(skip_locked=True, of=("self",))
        ids = list(due.values_list("id", flat=True)[:batch])
        if not ids:
            return 0
        path = archive_dir / workflow / f"{now:%Y-%m-%d}.jsonl.gz"
        _append(path, _lines(ids))
        # History has no database-level constraint (db_constraint=False): delete it by id here
        # rather than through Django's collector, which would load every row first.
        History.objects.filter(instance_id__in=ids).delete()
        Instance.objects.filter(id__in=ids).delete()
        RetentionBatch.objects.create(
            workflow=workflow,
            ran_at=now,
            cutoff=cutoff,
            purged=len(ids),
            archive=str(path),
            first_instance_id=ids[0],
            last_instance_id=ids[-1],
        )
    return len(ids)


def journal_prune(*, batch: int = JOURNAL_BATCH, max_batches: int = 100) -> int:
    """Delete the call journal rows of finished instances, `batch` per statement; how many went."""
    finished = Instance.objects.filter(status__in=FINISHED_STATUSES).values("id")
    pruned = 0
    for _ in range(max_batches):
        ids = list(CallJournal.objects.filter(instance_id__in=finished).values_list("id", flat=True)[:batch])
        if not ids:
            break
        pruned += CallJournal.objects.filter(id__in=ids).delete()[0]
    return pruned


@dataclass(frozen=True)
class RetentionResult:
    purged: dict[str, int]
    batches: int
    journal_pruned: int = 0


def retention_run(
    *,
    now: datetime,
    archive_dir: Path,
    batch: int = BATCH,
    max_batches: int = 100,
    stopping: Callable[[], bool] = lambda: False,
) -> RetentionResult:
    """Batches over every workflow with finished instances until none is due, `max_batches` ran,
    or `stopping()` says so; each batch commits on its own. First the finished instances' call
    journal goes (`journal_prune`)."""
    journal_pruned = journal_prune()
    workflows = sorted(
        set(Instance.objects.filter(status__in=FINISHED_STATUSES).values_list("workflow", flat=True).distinct())
    )
    purged: dict[str, int] = {}
    batches = 0
    for workflow in workflows:
        while batches < max_batches and not stopping():
            n = retention_purge_batch(workflow=workflow, now=now, archive_dir=archive_dir, batch=batch)
            if not n:
                break
            batches += 1
            purged[workflow] = purged.get(workflow, 0) + n
    return RetentionResult(purged, batches, journal_pruned)
