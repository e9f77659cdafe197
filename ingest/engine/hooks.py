"""The `on_error` hook: a workflow's cleanup, compensation or notification when an instance
errors or is terminated, run as a durable instance of its own.

    class Onboard(Workflow):
        name = "domain-onboard"
        on_error_retries = {"limit": 3, "delay": "30 seconds"}

        def on_error(self, ctx, failure):      # failure: instance_id, status, error, failed_step, params
            release_the_lock(failure["params"]["domain"], key=ctx.idempotency_key)

The ending that errors or terminates the instance (a worker's turn, or an operator's terminate)
inserts, in its own transaction, one instance of `runledger.on-error` with a deterministic id:
the hook is scheduled exactly when the ending commits, and an id that already exists is not
inserted again, so it never runs twice. That instance runs `on_error` as a `step.do` (its
retries, attempts, dead letter when exhausted), then writes its outcome to the origin's history.
The origin's ending is not delayed: it is errored or terminated at once. docs/engine-contract.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ingest.engine.errors import UnknownWorkflow
from ingest.engine.models import History, HistoryKind, Instance, Status
from ingest.engine.secrets import unseal_keys
from ingest.engine.workflow import Workflow, WorkflowEvent, get_workflow
from ingest.engine.writes import notify

HOOK_WORKFLOW = "runledger.on-error"
HOOK_STEP = "on-error"


def has_hook(cls: type[Workflow]) -> bool:
    return getattr(cls, "on_error", None) is not None and cls.name != HOOK_WORKFLOW


def hook_instance_id(origin_id: str, generation: int) -> str:
    """`<origin>-on-error` (a restart's generation appended); hashed when that passes 100 characters."""
    hid = f"{origin_id}-on-error" + (f"-g{generation}" if generation else "")
    if len(hid) <= 100:
        return hid
    digest = hashlib.sha256(hid.encode()).hexdigest()[:16]
    return f"{origin_id[:70]}-on-error-{digest}"


def hook_schedule(
    *,
    instance_id: str,
    workflow: str,
    tenant: str,
    generation: int,
    status: str,
    error_name: str = "",
    error_message: str = "",
    failed_step: str = "",
    now: datetime,
    note: Callable[..., Any] | None = None,
) -> str | None:
    """Insert the hook's instance, inside the caller's transaction (the one that ends the
    origin). Returns its id, or None when the workflow has no hook or it is already scheduled.
    `note(**data)` writes the origin's "scheduled" history row with the caller's own rows (so it
    follows the status change); without it the row is written here."""
    try:
        cls = get_workflow(workflow)
    except UnknownWorkflow:
        return None
    if not has_hook(cls):
        return None
    hid = hook_instance_id(instance_id, generation)
    if Instance.objects.filter(id=hid).exists():
        return None  # this generation's hook ran already (a retried instance that errored again)
    params = {
        "origin": instance_id,
        "workflow": workflow,
        "status": status,
        "failed_step": failed_step,
        "error": {"name": error_name, "message": error_message[:2000]} if error_name else None,
    }
    Instance.objects.create(
        id=hid,
        workflow=HOOK_WORKFLOW,
        tenant=tenant,
        status=Status.QUEUED,
        params=params,
        created_at=now,
        updated_at=now,
        ready_at=now,
        priority=cls.priority,
    )
    scheduled = {"hook": "on_error", "state": "scheduled", "instance": hid}
    rows = [
        History(
            instance_id=hid,
            workflow=HOOK_WORKFLOW,
            tenant=tenant,
            kind=HistoryKind.INSTANCE_CREATED,
            status=Status.QUEUED,
            data={"origin": instance_id},
            created_at=now,
        )
    ]
    if note is None:
        rows.append(
            History(
                instance_id=instance_id,
                workflow=workflow,
                tenant=tenant,
                kind=HistoryKind.HOOK,
                data=scheduled,
                created_at=now,
            )
        )
    else:
        note(**scheduled)
    History.objects.bulk_create(rows)
    notify.ready()
    notify.history()
    return hid


def hook_outcome_record(*, origin_id: str, hook_id: str, ok: bool, error: str = "", now: datetime) -> None:
    origin = Instance.objects.filter(id=origin_id).values("workflow", "tenant").first()
    if origin is None:
        return  # the origin was purged meanwhile; the hook's own instance keeps the outcome
    data: dict[str, Any] = {"hook": "on_error", "state": "complete" if ok else "errored", "instance": hook_id}
    if error:
        data["error"] = error[:2000]
    History.objects.create(
        instance_id=origin_id,
        workflow=origin["workflow"],
        tenant=origin["tenant"],
        kind=HistoryKind.HOOK,
        status="complete" if ok else "errored",
        data=data,
        created_at=now,
    )
    notify.history()


class OnErrorHook(Workflow):
    """Runs an errored or terminated instance's `on_error` as a step, then notes the outcome."""

    name = HOOK_WORKFLOW

    def run(self, event: WorkflowEvent, step: Any) -> Any:
        from ingest.engine import clock

        p = event.payload
        origin_cls = get_workflow(p["workflow"])
        origin = Instance.objects.filter(id=p["origin"]).values("params").first()
        failure = {
            "instance_id": p["origin"],
            "workflow": p["workflow"],
            "status": p["status"],
            "error": p["error"],
            "failed_step": p["failed_step"],
            "params": unseal_keys(origin["params"]) if origin else {},
        }
        hook = origin_cls().on_error  # type: ignore[attr-defined]
        options = {"retries": origin_cls.on_error_retries, "timeout": origin_cls.on_error_timeout}
        try:
            result = step.do(HOOK_STEP, lambda ctx: hook(ctx, failure), **options)
        except Exception as exc:  # noqa: BLE001 - the hook's failure is the origin's history too, then ours
            message = f"{type(exc).__name__}: {exc}"
            step.do(
                "record-outcome",
                lambda: hook_outcome_record(
                    origin_id=p["origin"], hook_id=event.instance_id, ok=False, error=message, now=clock.now()
                ),
            )
            raise
        step.do(
            "record-outcome",
            lambda: hook_outcome_record(origin_id=p["origin"], hook_id=event.instance_id, ok=True, now=clock.now()),
        )
        return result
