"""The operators' actions on an instance: pause, resume, terminate, restart (from a step),
retry a failed run, replay with new params. Each takes the instance's row lock, checks its
status and writes its operator and status history in the same transaction."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from ingest.engine import clock, hooks
from ingest.engine.errors import (
    InvalidTransition,
    UnknownStep,
)
from ingest.engine.models import (
    FINISHED_STATUSES,
    Control,
    DeadLetter,
    DeadLetterState,
    Instance,
    Status,
    Step,
    StepKind,
    StepStatus,
)
from ingest.engine.services.base import (
    created_history,
    finished_error,
    is_leased,
    locked,
    operator_history,
    rerun_instance,
    rerun_params,
    status_history,
)
from ingest.engine.services.versions import version_check_runnable
from ingest.engine.workflow import get_workflow
from ingest.engine.writes import notify


def instance_pause(*, instance_id: str, actor: str = "", reason: str = "") -> Instance:
    """Pause: at once if no worker holds it, else waitingForPause until the running step ends."""
    now = clock.now()
    with transaction.atomic():
        inst = locked(instance_id)
        if inst.status in FINISHED_STATUSES:
            raise finished_error(inst, "pause")
        if inst.status in (Status.PAUSED, Status.WAITING_FOR_PAUSE):
            raise InvalidTransition(f"instance {inst.id} is already {inst.status}")
        if is_leased(inst, now):
            inst.status, inst.control = Status.WAITING_FOR_PAUSE, Control.PAUSE
        else:
            inst.paused_from = inst.status
            inst.status, inst.paused_at, inst.paused_ready_at, inst.ready_at = Status.PAUSED, now, inst.ready_at, None
            inst.lease_owner, inst.lease_token, inst.lease_expires_at = "", "", None
        inst.updated_at = now
        inst.save()
        operator_history(inst, action="pause", actor=actor, reason=reason, now=now)
        status_history(inst, now=now, actor=actor)
    return inst


def instance_resume(*, instance_id: str, actor: str = "", reason: str = "") -> Instance:
    """Resume a paused instance; its sleep and retry timers move on by the time it was paused."""
    now = clock.now()
    with transaction.atomic():
        inst = locked(instance_id)
        if inst.status == Status.WAITING_FOR_PAUSE:
            inst.status, inst.control = Status.RUNNING, Control.NONE
        elif inst.status == Status.PAUSED:
            shift = now - (inst.paused_at or now)
            inst.ready_at = None if inst.paused_ready_at is None else inst.paused_ready_at + shift
            if inst.ready_at is not None and inst.ready_at < now:
                inst.ready_at = now
            _shift_timers(inst.id, shift)
            inst.status = inst.paused_from or Status.QUEUED
            inst.paused_at = inst.paused_ready_at = None
            inst.paused_from = ""
        else:
            raise InvalidTransition(f"instance {inst.id} is {inst.status}, not paused; only paused instances resume")
        inst.updated_at = now
        inst.save()
        operator_history(inst, action="resume", actor=actor, reason=reason, now=now, shifted_seconds=None)
        status_history(inst, now=now, actor=actor)
        notify.ready()
    return inst


def _shift_timers(instance_id: str, shift: timedelta) -> None:
    from django.db.models import F

    Step.objects.filter(instance_id=instance_id, wake_at__isnull=False).exclude(
        status__in=[StepStatus.COMPLETE, StepStatus.ERRORED]
    ).update(wake_at=F("wake_at") + shift)


def instance_terminate(*, instance_id: str, rollback: bool = False, actor: str = "", reason: str = "") -> Instance:
    """Terminate. With rollback, a worker replays the instance and runs its rollback handlers first."""
    now = clock.now()
    with transaction.atomic():
        inst = locked(instance_id)
        if inst.status in FINISHED_STATUSES:
            raise finished_error(inst, "terminate")
        if rollback:
            inst.control = Control.TERMINATE_ROLLBACK
            if not is_leased(inst, now):
                inst.ready_at = now
                if inst.status == Status.PAUSED:
                    inst.status = inst.paused_from or Status.RUNNING
        else:
            inst.status, inst.ended_at, inst.ready_at, inst.control = Status.TERMINATED, now, None, ""
            inst.lease_owner, inst.lease_token, inst.lease_expires_at = "", "", None
        inst.updated_at = now
        inst.save()
        operator_history(inst, action="terminate", actor=actor, reason=reason, now=now, rollback=rollback)
        if not rollback:
            status_history(inst, now=now, actor=actor)
            hooks.hook_schedule(
                instance_id=inst.id,
                workflow=inst.workflow,
                tenant=inst.tenant,
                generation=inst.generation,
                status=Status.TERMINATED,
                now=now,
            )
            if inst.parent_id:  # a fan-out's item counts in as terminated; a child wakes its parent
                from ingest.engine.runtime.fan_out_items import child_finished

                child_finished(instance_id=inst.id, parent_id=inst.parent_id, status=Status.TERMINATED, now=now)
        notify.ready()
    return inst


def instance_restart(*, instance_id: str, from_step: str | None = None, actor: str = "", reason: str = "") -> Instance:
    """Run again from scratch, or keep every result recorded before `from_step` and go on from there."""
    now = clock.now()
    with transaction.atomic():
        inst = locked(instance_id)
        steps = Step.objects.filter(instance_id=inst.id)
        if from_step is not None:
            first = steps.filter(name=from_step).exclude(kind=StepKind.ROLLBACK).order_by("position").first()
            if first is None:
                names = list(
                    steps.exclude(kind=StepKind.ROLLBACK).order_by("position").values_list("name", flat=True).distinct()
                )
                raise UnknownStep(
                    f"instance {inst.id} has no step named {from_step!r}; its steps are: "
                    + (", ".join(dict.fromkeys(names)) or "none yet")
                )
            steps = steps.filter(position__gte=first.position)
            version_check_runnable(
                workflow=inst.workflow, version=inst.workflow_version, action="restart", instance_id=inst.id
            )
        else:
            # From scratch nothing of the old path is kept: it starts on the code's current version.
            inst.workflow_version = get_workflow(inst.workflow).version
        steps.delete()
        Step.objects.filter(instance_id=inst.id, kind=StepKind.ROLLBACK).delete()
        _reset(inst, now=now)
        inst.generation += 1
        inst.save()
        operator_history(inst, action="restart", actor=actor, reason=reason, now=now, from_step=from_step)
        status_history(inst, now=now, actor=actor)
        DeadLetter.objects.filter(instance_id=inst.id, state=DeadLetterState.OPEN).update(
            state=DeadLetterState.REDRIVEN, resolved_at=now, resolved_by=actor, resolution=f"restarted: {reason}"
        )
        notify.ready()
    return inst


def _reset(inst: Instance, *, now: datetime, ready_at: datetime | None = None) -> None:
    inst.status = Status.QUEUED
    inst.output, inst.error_name, inst.error_message = None, "", ""
    inst.ended_at, inst.control, inst.paused_at, inst.paused_ready_at, inst.paused_from = None, "", None, None, ""
    inst.lease_owner, inst.lease_token, inst.lease_expires_at = "", "", None
    inst.ready_at, inst.updated_at = ready_at or now, now


def instance_retry(
    *, instance_id: str, actor: str = "", reason: str = "", start_at: datetime | None = None
) -> Instance:
    """Retry an errored instance from its failed step: every completed step keeps its result."""
    now = clock.now()
    with transaction.atomic():
        inst = locked(instance_id)
        if inst.status != Status.ERRORED:
            raise InvalidTransition(f"instance {inst.id} is {inst.status}; only errored instances can be retried")
        version_check_runnable(
            workflow=inst.workflow, version=inst.workflow_version, action="retry", instance_id=inst.id
        )
        failed = Step.objects.filter(instance_id=inst.id, status=StepStatus.ERRORED).exclude(kind=StepKind.ROLLBACK)
        failed_names = list(failed.values_list("name", flat=True))
        failed.delete()  # their attempts go with them; the history keeps the record
        Step.objects.filter(instance_id=inst.id, kind=StepKind.ROLLBACK).delete()
        _reset(inst, now=now, ready_at=start_at)
        inst.save()
        operator_history(inst, action="retry", actor=actor, reason=reason, now=now, steps=failed_names)
        status_history(inst, now=now, actor=actor)
        DeadLetter.objects.filter(instance_id=inst.id, state=DeadLetterState.OPEN).update(
            state=DeadLetterState.REDRIVEN, resolved_at=now, resolved_by=actor, resolution=reason or "retried"
        )
        notify.ready()
    return inst


def instance_replay(
    *, instance_id: str, params: Any = None, new_id: str | None = None, actor: str = "", reason: str = ""
) -> Instance:
    """Run the same workflow again as a new instance linked to this one, with the same or edited params."""
    now = clock.now()
    with transaction.atomic():
        source = locked(instance_id)
        if new_id is None:
            n = Instance.objects.filter(replay_of_id=source.id).count() + 1
            new_id = f"{source.id[:88]}-replay-{n}"
            while Instance.objects.filter(id=new_id).exists():
                n += 1
                new_id = f"{source.id[:88]}-replay-{n}"
        params = rerun_params(source.params, params)
        edited = params is not None and params != source.params
        inst = rerun_instance(source, new_id=new_id, params=params, now=now, replay_of=source.id)
        inst.save(force_insert=True)
        created_history(inst, actor=actor, reason=reason, replay_of=source.id, edited=edited).save()
        operator_history(
            source, action="replay", actor=actor, reason=reason, now=now, replayed_as=inst.id, edited=edited
        )
        DeadLetter.objects.filter(instance_id=source.id, state=DeadLetterState.OPEN).update(
            state=DeadLetterState.REDRIVEN,
            resolved_at=now,
            resolved_by=actor,
            resolution=f"replayed as {inst.id}" + (f": {reason}" if reason else ""),
        )
        notify.ready()
    return inst
