"""Fork: a new instance that starts at a step of an old one. The old one's results before that
step are copied (not run again), the params may be edited, and the two are linked both ways
(`fork_of` on the new one, an operator history row on the old one)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from ingest.engine import clock
from ingest.engine.errors import InvalidTransition, UnknownStep
from ingest.engine.models import Attempt, Instance, Step, StepKind, StepStatus
from ingest.engine.runtime.records import step_label
from ingest.engine.services.base import (
    created_history,
    derived_id,
    locked,
    operator_history,
    rerun_instance,
    rerun_params,
)
from ingest.engine.services.versions import version_check_runnable
from ingest.engine.workflow import get_workflow
from ingest.engine.writes import notify

_SETTLED = (StepStatus.COMPLETE, StepStatus.ERRORED)
# What a fork copies of a step and of its attempts: every column but the row's identity, its
# parent, and what only the live run writes (a sleep's wake-up, the live log, an attempt's logs).
_STEP_SKIPPED = frozenset({"id", "instance_id", "wake_at", "live_log"})
_ATTEMPT_SKIPPED = frozenset({"id", "step_id", "logs"})


def _copied(model: type[Step] | type[Attempt], skipped: frozenset[str]) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields if f.attname not in skipped]


def fork_points(*, instance_id: str) -> list[str]:
    """The steps an instance can be forked from, in the order the run asked for them (labels:
    `name`, or `name#2` for a name's second call)."""
    steps = (
        Step.objects.filter(instance_id=instance_id)
        .exclude(kind=StepKind.ROLLBACK)
        .order_by("position")
        .values_list("name", "seq")
    )
    return [step_label(name, seq) for name, seq in steps]


def instance_fork(
    *,
    instance_id: str,
    from_step: str,
    params: Any = None,
    new_id: str | None = None,
    actor: str = "",
    reason: str = "",
) -> Instance:
    """Start a new instance of the same workflow at step `from_step` (a label, `name` or `name#2`)
    of this one: every step before it is copied with its result (or its failure) and replays from
    the copy; `from_step` and everything after run anew, with `params` (default: the original's).
    The fork starts on the original's workflow version, so the copied history matches its path;
    forking from the first step copies nothing and starts on the current version."""
    now = clock.now()
    with transaction.atomic():
        source = locked(instance_id)
        steps = list(Step.objects.filter(instance_id=source.id).exclude(kind=StepKind.ROLLBACK).order_by("position"))
        target = next((s for s in steps if step_label(s.name, s.seq) == from_step), None)
        if target is None:
            raise UnknownStep(
                f"instance {source.id} has no step {from_step!r} to fork from; its steps are: "
                + (", ".join(step_label(s.name, s.seq) for s in steps) or "none yet")
            )
        before = [s for s in steps if s.position < target.position]
        _check_copyable(source, before, from_step)
        version = source.workflow_version if before else get_workflow(source.workflow).version
        if before:
            version_check_runnable(workflow=source.workflow, version=version, action="fork", instance_id=source.id)
        if new_id is None:
            new_id = derived_id(source.id, "fork", lambda i: Instance.objects.filter(id=i).exists())
        params = rerun_params(source.params, params)
        inst = rerun_instance(source, new_id=new_id, params=params, now=now, version=version)
        inst.fork_of_id, inst.fork_step = source.id, from_step
        inst.save(force_insert=True)
        _copy_steps(before, to=inst.id)
        edited = params is not None and params != source.params
        created_history(
            inst,
            actor=actor,
            reason=reason,
            fork_of=source.id,
            fork_step=from_step,
            copied_steps=len(before),
            edited=edited,
            version=version,
        ).save()
        operator_history(
            source,
            action="fork",
            actor=actor,
            reason=reason,
            now=now,
            forked_as=inst.id,
            from_step=from_step,
            edited=edited,
        )
        notify.ready()
    return inst


def _check_copyable(source: Instance, before: list[Step], from_step: str) -> None:
    for s in before:
        label = step_label(s.name, s.seq)
        if s.status not in _SETTLED:
            raise InvalidTransition(
                f"cannot fork instance {source.id} from step {from_step!r}: step {label!r} before it is "
                f"{s.status}, not finished — fork from {label!r} or an earlier step"
            )
        if s.kind == StepKind.FAN_OUT:
            # Its items' outcomes are rows of the original's aggregate, not the step's result.
            raise InvalidTransition(
                f"cannot fork instance {source.id} from step {from_step!r}: fan-out {label!r} before it keeps its "
                f"items' results with the original — fork from {label!r} or an earlier step"
            )


def _copy_steps(before: list[Step], *, to: str) -> None:
    if not before:
        return
    step_fields, attempt_fields = _copied(Step, _STEP_SKIPPED), _copied(Attempt, _ATTEMPT_SKIPPED)
    copies = Step.objects.bulk_create([Step(instance_id=to, **{f: getattr(s, f) for f in step_fields}) for s in before])
    new_ids = {s.id: c.id for s, c in zip(before, copies, strict=True)}
    Attempt.objects.bulk_create(
        [
            Attempt(step_id=new_ids[a.step_id], **{f: getattr(a, f) for f in attempt_fields})
            for a in Attempt.objects.filter(step_id__in=list(new_ids)).order_by("step_id", "number")
        ]
    )
