"""Reads of the ledger the engine's API offers (the dashboard has its own selectors too)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ingest.engine.errors import InstanceNotFound
from ingest.engine.models.fan_out import FanOut, FanOutItem, FanOutItemState, FanOutState
from ingest.engine.models.history import History, HistoryKind
from ingest.engine.models.instances import FINISHED_STATUSES, Attempt, Instance, Step
from ingest.engine.models.versions import RetiredVersion
from ingest.engine.runtime.fan_out_packs import carrier_span
from ingest.engine.secrets import public_value
from ingest.engine.workflow import get_workflow


def step_progress(*, instance_id: str) -> dict[str, dict[str, Any]]:
    """The latest `ctx.progress` report of each step of the instance, by step label
    (`name`, `name#2`): {done, total, message, attempt, at}."""
    latest: dict[str, dict[str, Any]] = {}
    rows = (
        History.objects.filter(instance_id=instance_id, kind=HistoryKind.STEP_PROGRESS)
        .order_by("id")
        .values_list("step_name", "data", "created_at")
    )
    for label, data, at in rows:
        latest[label] = {**data, "at": at}
    return latest


def progress_of(progress: dict[str, dict[str, Any]], name: str, seq: int) -> dict[str, Any] | None:
    return progress.get(name if seq == 1 else f"{name}#{seq}")


def instance_status(*, instance_id: str, include_results: bool = True) -> dict[str, Any]:
    """Status as Cloudflare's `instance.status()`: status, output, error {name, message}, steps."""
    try:
        inst = Instance.objects.get(id=instance_id)
    except Instance.DoesNotExist:
        raise InstanceNotFound(instance_id) from None
    steps = list(Step.objects.filter(instance_id=inst.id).order_by("position", "id"))
    progress = step_progress(instance_id=inst.id)
    attempts: dict[int, list[dict[str, Any]]] = {}
    for a in Attempt.objects.filter(step__instance_id=inst.id).order_by("step_id", "number"):
        attempts.setdefault(a.step_id, []).append(
            {
                "number": a.number,
                "started_at": a.started_at,
                "ended_at": a.ended_at,
                "ok": a.ok,
                "error": {"name": a.error_name, "message": a.error_message} if not a.ok else None,
                "retry_delay_seconds": a.retry_delay_seconds,
            }
        )
    return {
        "id": inst.id,
        "workflow": inst.workflow,
        "tenant": inst.tenant,
        "status": inst.status,
        "params": public_value(inst.params),
        "output": public_value(inst.output),
        "error": {"name": inst.error_name, "message": inst.error_message} if inst.error_name else None,
        "created_at": inst.created_at,
        "started_at": inst.started_at,
        "ended_at": inst.ended_at,
        "replay_of": inst.replay_of_id,
        "parent": inst.parent_id,
        "version": inst.workflow_version,
        "fork_of": inst.fork_of_id,
        "fork_step": inst.fork_step or None,
        "steps": [
            {
                "name": s.name,
                "count": s.seq,
                "kind": s.kind,
                "status": s.status,
                "result": (None if s.sensitive else s.result) if include_results else None,
                "error": {"name": s.error_name, "message": s.error_message}
                if s.error_name and s.status == "errored"
                else None,
                "started_at": s.started_at,
                "ended_at": s.ended_at,
                "wake_at": s.wake_at,
                "attempts": attempts.get(s.id, []),
                "config": s.config,
                "progress": progress_of(progress, s.name, s.seq),
            }
            for s in steps
        ],
    }


def fan_out_list(*, instance_id: str, failed_limit: int = 20) -> list[dict[str, Any]]:
    """An instance's fan-outs, oldest first, as the dashboard shows them: received/expected, how
    many failed or are missing, and the first `failed_limit` failed items (index, instance, error)."""
    out: list[dict[str, Any]] = []
    for fo in FanOut.objects.filter(instance_id=instance_id).order_by("started_at", "id"):
        failed = (
            FanOutItem.objects.filter(fan_out_id=fo.id, state__in=[FanOutItemState.ERRORED, FanOutItemState.TERMINATED])
            .order_by("index")
            .values("index", "instance_id", "state", "error_name", "error_message")[:failed_limit]
        )
        out.append(
            {
                "id": fo.id,
                "step_id": fo.step_id,
                "step": fo.step_name,
                "handler": fo.handler,
                "handler_kind": fo.handler_kind,
                "item_workflow": fo.item_workflow,
                "state": fo.state,
                "expected": fo.expected,
                "created": fo.created,
                "received": fo.received,
                "failed": fo.failed,
                "missing": fo.expected - fo.received if fo.state == FanOutState.TIMED_OUT else 0,
                "started_at": fo.started_at,
                "updated_at": fo.updated_at,
                "deadline": fo.deadline,
                "closed_at": fo.closed_at,
                "failed_items": _with_carriers([dict(r) for r in failed], parent=instance_id, fan_out_id=fo.id),
            }
        )
    return out


def _with_carriers(items: list[dict[str, Any]], *, parent: str, fan_out_id: int) -> list[dict[str, Any]]:
    """A packed item's `instance_id` is its carrier's (where its steps and dead letter are): a
    packed item has no instance of its own."""
    if not items:
        return items
    spans = [
        (span, cid)
        for cid in Instance.objects.filter(parent_id=parent, id__startswith=f"_fo{fan_out_id}-").values_list(
            "id", flat=True
        )
        if (span := carrier_span(cid)) is not None
    ]
    for item in items:
        for (_, first, last), cid in spans:
            if first <= item["index"] <= last:
                item["instance_id"] = cid
    return items


def workflow_versions(*, workflow: str, tenants: Collection[str]) -> list[dict[str, Any]]:
    """The versions of `workflow`, newest first: the code's current one, every one an instance of
    `tenants` started on, and every retired one; with that instance count and how many still run
    (not finished), and when and by whom a retired one was retired."""
    from django.db.models import Count, Q

    current = get_workflow(workflow).version
    rows: dict[int, dict[str, Any]] = {
        r["workflow_version"]: dict(r)
        for r in (
            Instance.objects.filter(workflow=workflow, tenant__in=list(tenants))
            .values("workflow_version")
            .annotate(instances=Count("id"), running=Count("id", filter=~Q(status__in=FINISHED_STATUSES)))
            .order_by()
        )
    }
    retired = {r.version: r for r in RetiredVersion.objects.filter(workflow=workflow)}
    out = []
    for version in sorted(set(rows) | set(retired) | {current}, reverse=True):
        row = rows.get(version, {})
        gone = retired.get(version)
        out.append(
            {
                "version": version,
                "current": version == current,
                "instances": row.get("instances", 0),
                "running": row.get("running", 0),
                "retired_at": gone.retired_at if gone else None,
                "retired_by": gone.retired_by if gone else "",
                "retirable": version < current and gone is None,
            }
        )
    return out
