"""Every write outside a worker's turn: creating instances and the operators' actions.

Each function takes keyword-only arguments, checks the instance's status under a row lock, and
writes its history row (who, why) in the same transaction. Interfaces (dashboard, API, admin,
commands) call these and nothing else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import IntegrityError, transaction

from ingest.engine import clock, notify
from ingest.engine.errors import (
    ApprovalError,
    BatchTooLarge,
    DeadLetterError,
    InstanceAlreadyExists,
    InstanceFinished,
    InstanceNotFound,
    InvalidInstanceId,
    InvalidParams,
    InvalidTransition,
    UnknownStep,
)
from ingest.engine.models import (
    FINISHED_STATUSES,
    ApprovalKind,
    ApprovalRequest,
    ApprovalState,
    Budget,
    BudgetGrant,
    Control,
    DeadLetter,
    DeadLetterState,
    History,
    HistoryKind,
    Instance,
    PendingEvent,
    Status,
    Step,
    StepKind,
    StepStatus,
)
from ingest.engine.periods import period_start
from ingest.engine.workflow import get_workflow

ID_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")
MAX_BATCH = 100
MAX_PARAMS_BYTES = 1024 * 1024


# ---- creating ------------------------------------------------------------------------


def _check_id(instance_id: str) -> None:
    if not isinstance(instance_id, str) or len(instance_id) > 100 or not ID_PATTERN.match(instance_id):
        shown = instance_id[:120] if isinstance(instance_id, str) else instance_id
        raise InvalidInstanceId(
            f"instance id {shown!r} is invalid: ids are 1–100 characters of letters, digits, '_' "
            "and '-', and do not start with '-'"
        )


def _check_params(params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise InvalidParams(f"params must be a JSON object (a dict); got {type(params).__name__}")
    try:
        text = json.dumps(params, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidParams(f"params are not JSON-serialisable: {exc}") from None
    if len(text.encode()) > MAX_PARAMS_BYTES:
        raise InvalidParams("params are larger than 1 MiB; pass a reference to stored data instead")
    return json.loads(text)  # type: ignore[no-any-return]


def _new_instance(*, workflow: str, id: str | None, params: Any, tenant: str, priority: int | None,
                  start_at: datetime | None, now: datetime, replay_of: str | None = None) -> Instance:
    cls = get_workflow(workflow)
    instance_id = id if id is not None else _generated_id(workflow, now)
    _check_id(instance_id)
    if not isinstance(tenant, str) or not tenant.strip() or len(tenant) > 100:
        raise InvalidParams(f"tenant {tenant!r} must be a non-empty string of at most 100 characters")
    checked = _check_params(params)
    key = ""
    if cls.concurrency_key:
        key = str(checked.get(cls.concurrency_key, tenant if cls.concurrency_key == "tenant" else ""))[:200]
    return Instance(
        id=instance_id, workflow=workflow, tenant=tenant, status=Status.QUEUED, params=checked,
        created_at=now, updated_at=now, ready_at=max(start_at, now) if start_at else now,
        priority=cls.priority if priority is None else priority, concurrency_key=key,
        replay_of_id=replay_of,
    )


def _generated_id(workflow: str, now: datetime) -> str:
    import secrets

    return f"{workflow[:60]}-{now:%Y%m%d%H%M%S}-{secrets.token_hex(4)}".replace(".", "-")


def _created_history(inst: Instance, *, actor: str, reason: str = "", **data: Any) -> History:
    notify.history()
    return History(instance_id=inst.id, workflow=inst.workflow, tenant=inst.tenant,
                   kind=HistoryKind.INSTANCE_CREATED, status=Status.QUEUED, actor=actor,
                   reason=reason, data=data, created_at=inst.created_at)


def instance_create(*, workflow: str, id: str | None = None, params: Any = None, tenant: str = "default",
                    priority: int | None = None, start_at: datetime | None = None, actor: str = "") -> Instance:
    """Create an instance; a duplicate id raises InstanceAlreadyExists (treat as already processed)."""
    inst = _new_instance(workflow=workflow, id=id, params=params, tenant=tenant, priority=priority,
                         start_at=start_at, now=clock.now())
    try:
        with transaction.atomic():
            inst.save(force_insert=True)
            _created_history(inst, actor=actor).save()
            notify.ready()
    except IntegrityError:
        if Instance.objects.filter(id=inst.id).exists():
            raise InstanceAlreadyExists(inst.id) from None
        raise
    return inst


def instance_create_batch(*, workflow: str, items: Iterable[dict[str, Any]], actor: str = "") -> list[Instance]:
    """Create up to 100 instances at once, all or none; a duplicate id raises InstanceAlreadyExists."""
    items = list(items)
    if len(items) > MAX_BATCH:
        raise BatchTooLarge(f"create_batch got {len(items)} instances; the limit is {MAX_BATCH} per call")
    now = clock.now()
    instances = [
        _new_instance(workflow=workflow, id=item.get("id"), params=item.get("params"),
                      tenant=item.get("tenant", "default"), priority=item.get("priority"),
                      start_at=item.get("start_at"), now=now)
        for item in items
    ]
    ids = [i.id for i in instances]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise InstanceAlreadyExists(duplicates[0])
    with transaction.atomic():
        existing = list(Instance.objects.filter(id__in=ids).values_list("id", flat=True)[:1])
        if existing:
            raise InstanceAlreadyExists(existing[0])
        try:
            with transaction.atomic():
                Instance.objects.bulk_create(instances)
        except IntegrityError:
            taken = Instance.objects.filter(id__in=ids).values_list("id", flat=True).first()
            raise InstanceAlreadyExists(taken or ids[0]) from None
        History.objects.bulk_create([_created_history(i, actor=actor) for i in instances])
        notify.ready()
    return instances


# ---- locking and history helpers -----------------------------------------------------------


def _locked(instance_id: str) -> Instance:
    try:
        return Instance.objects.select_for_update().get(id=instance_id)
    except Instance.DoesNotExist:
        raise InstanceNotFound(instance_id) from None


def _operator(inst: Instance, *, action: str, actor: str, reason: str, now: datetime, **data: Any) -> None:
    notify.history()
    History.objects.create(instance_id=inst.id, workflow=inst.workflow, tenant=inst.tenant,
                           kind=HistoryKind.OPERATOR, status=inst.status, actor=actor, reason=reason,
                           data={"action": action, **data}, created_at=now)


def _status_change(inst: Instance, *, now: datetime, actor: str = "", reason: str = "") -> None:
    History.objects.create(instance_id=inst.id, workflow=inst.workflow, tenant=inst.tenant,
                           kind=HistoryKind.INSTANCE_STATUS, status=inst.status, actor=actor,
                           reason=reason, created_at=now)


def _finished(inst: Instance, action: str) -> InstanceFinished:
    return InstanceFinished(f"cannot {action} instance {inst.id}: it is {inst.status} — restart or replay it to run it again")


def _is_leased(inst: Instance, now: datetime) -> bool:
    return bool(inst.lease_token) and inst.lease_expires_at is not None and inst.lease_expires_at > now


# ---- pause / resume / terminate -------------------------------------------------------------


def instance_pause(*, instance_id: str, actor: str = "", reason: str = "") -> Instance:
    """Pause: at once if no worker holds it, else waitingForPause until the running step ends."""
    now = clock.now()
    with transaction.atomic():
        inst = _locked(instance_id)
        if inst.status in FINISHED_STATUSES:
            raise _finished(inst, "pause")
        if inst.status in (Status.PAUSED, Status.WAITING_FOR_PAUSE):
            raise InvalidTransition(f"instance {inst.id} is already {inst.status}")
        if _is_leased(inst, now):
            inst.status, inst.control = Status.WAITING_FOR_PAUSE, Control.PAUSE
        else:
            inst.paused_from = inst.status
            inst.status, inst.paused_at, inst.paused_ready_at, inst.ready_at = Status.PAUSED, now, inst.ready_at, None
            inst.lease_owner, inst.lease_token, inst.lease_expires_at = "", "", None
        inst.updated_at = now
        inst.save()
        _operator(inst, action="pause", actor=actor, reason=reason, now=now)
        _status_change(inst, now=now, actor=actor)
    return inst


def instance_resume(*, instance_id: str, actor: str = "", reason: str = "") -> Instance:
    """Resume a paused instance; its sleep and retry timers move on by the time it was paused."""
    now = clock.now()
    with transaction.atomic():
        inst = _locked(instance_id)
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
        _operator(inst, action="resume", actor=actor, reason=reason, now=now, shifted_seconds=None)
        _status_change(inst, now=now, actor=actor)
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
        inst = _locked(instance_id)
        if inst.status in FINISHED_STATUSES:
            raise _finished(inst, "terminate")
        if rollback:
            inst.control = Control.TERMINATE_ROLLBACK
            if not _is_leased(inst, now):
                inst.ready_at = now
                if inst.status == Status.PAUSED:
                    inst.status = inst.paused_from or Status.RUNNING
        else:
            inst.status, inst.ended_at, inst.ready_at, inst.control = Status.TERMINATED, now, None, ""
            inst.lease_owner, inst.lease_token, inst.lease_expires_at = "", "", None
        inst.updated_at = now
        inst.save()
        _operator(inst, action="terminate", actor=actor, reason=reason, now=now, rollback=rollback)
        if not rollback:
            _status_change(inst, now=now, actor=actor)
            if inst.parent_id:
                from ingest.engine.store import wake_parent

                wake_parent(inst.parent_id, now=now)
        notify.ready()
    return inst


# ---- restart / retry / replay ---------------------------------------------------------------


def instance_restart(*, instance_id: str, from_step: str | None = None, actor: str = "", reason: str = "") -> Instance:
    """Run again from scratch, or keep every result recorded before `from_step` and go on from there."""
    now = clock.now()
    with transaction.atomic():
        inst = _locked(instance_id)
        steps = Step.objects.filter(instance_id=inst.id)
        if from_step is not None:
            first = steps.filter(name=from_step).exclude(kind=StepKind.ROLLBACK).order_by("position").first()
            if first is None:
                names = list(steps.exclude(kind=StepKind.ROLLBACK).order_by("position").values_list("name", flat=True).distinct())
                raise UnknownStep(
                    f"instance {inst.id} has no step named {from_step!r}; its steps are: "
                    + (", ".join(dict.fromkeys(names)) or "none yet")
                )
            steps = steps.filter(position__gte=first.position)
        steps.delete()
        Step.objects.filter(instance_id=inst.id, kind=StepKind.ROLLBACK).delete()
        _reset(inst, now=now)
        inst.generation += 1
        inst.save()
        _operator(inst, action="restart", actor=actor, reason=reason, now=now, from_step=from_step)
        _status_change(inst, now=now, actor=actor)
        DeadLetter.objects.filter(instance_id=inst.id, state=DeadLetterState.OPEN).update(
            state=DeadLetterState.REDRIVEN, resolved_at=now, resolved_by=actor, resolution=f"restarted: {reason}")
        notify.ready()
    return inst


def _reset(inst: Instance, *, now: datetime, ready_at: datetime | None = None) -> None:
    inst.status = Status.QUEUED
    inst.output, inst.error_name, inst.error_message = None, "", ""
    inst.ended_at, inst.control, inst.paused_at, inst.paused_ready_at, inst.paused_from = None, "", None, None, ""
    inst.lease_owner, inst.lease_token, inst.lease_expires_at = "", "", None
    inst.ready_at, inst.updated_at = ready_at or now, now


def instance_retry(*, instance_id: str, actor: str = "", reason: str = "", start_at: datetime | None = None) -> Instance:
    """Retry an errored instance from its failed step: every completed step keeps its result."""
    now = clock.now()
    with transaction.atomic():
        inst = _locked(instance_id)
        if inst.status != Status.ERRORED:
            raise InvalidTransition(f"instance {inst.id} is {inst.status}; only errored instances can be retried")
        failed = Step.objects.filter(instance_id=inst.id, status=StepStatus.ERRORED).exclude(kind=StepKind.ROLLBACK)
        failed_names = list(failed.values_list("name", flat=True))
        failed.delete()  # their attempts go with them; the history keeps the record
        Step.objects.filter(instance_id=inst.id, kind=StepKind.ROLLBACK).delete()
        _reset(inst, now=now, ready_at=start_at)
        inst.save()
        _operator(inst, action="retry", actor=actor, reason=reason, now=now, steps=failed_names)
        _status_change(inst, now=now, actor=actor)
        DeadLetter.objects.filter(instance_id=inst.id, state=DeadLetterState.OPEN).update(
            state=DeadLetterState.REDRIVEN, resolved_at=now, resolved_by=actor, resolution=reason or "retried")
        notify.ready()
    return inst


def instance_replay(*, instance_id: str, params: Any = None, new_id: str | None = None, actor: str = "",
                    reason: str = "") -> Instance:
    """Run the same workflow again as a new instance linked to this one, with the same or edited params."""
    now = clock.now()
    with transaction.atomic():
        source = _locked(instance_id)
        if new_id is None:
            n = Instance.objects.filter(replay_of_id=source.id).count() + 1
            new_id = f"{source.id[:88]}-replay-{n}"
            while Instance.objects.filter(id=new_id).exists():
                n += 1
                new_id = f"{source.id[:88]}-replay-{n}"
        edited = params is not None and params != source.params
        inst = _new_instance(workflow=source.workflow, id=new_id, tenant=source.tenant,
                             params=source.params if params is None else params, priority=source.priority,
                             start_at=None, now=now, replay_of=source.id)
        if Instance.objects.filter(id=inst.id).exists():
            raise InstanceAlreadyExists(inst.id)
        inst.save(force_insert=True)
        _created_history(inst, actor=actor, reason=reason, replay_of=source.id, edited=edited).save()
        _operator(source, action="replay", actor=actor, reason=reason, now=now, replayed_as=inst.id, edited=edited)
        DeadLetter.objects.filter(instance_id=source.id, state=DeadLetterState.OPEN).update(
            state=DeadLetterState.REDRIVEN, resolved_at=now, resolved_by=actor,
            resolution=f"replayed as {inst.id}" + (f": {reason}" if reason else ""))
        notify.ready()
    return inst


# ---- events ---------------------------------------------------------------------------------


def instance_send_event(*, instance_id: str, type: str, payload: Any = None, actor: str = "") -> PendingEvent:
    """Deliver an event; buffered per type until a wait_for_event of that type takes it (FIFO)."""
    if not isinstance(type, str) or not type.strip() or len(type) > 200:
        raise InvalidParams(f"event type {type!r} must be a non-empty string of at most 200 characters")
    try:
        json.dumps(payload, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidParams(f"event payload is not JSON-serialisable: {exc}") from None
    now = clock.now()
    with transaction.atomic():
        inst = _locked(instance_id)
        if inst.status in FINISHED_STATUSES:
            raise InstanceFinished(
                f"cannot send event {type!r} to instance {inst.id}: it is {inst.status} and takes no more events"
            )
        event = PendingEvent.objects.create(instance=inst, type=type, payload=payload, created_at=now, sender=actor)
        notify.history()
        History.objects.create(instance_id=inst.id, workflow=inst.workflow, tenant=inst.tenant,
                               kind=HistoryKind.EVENT_RECEIVED, actor=actor,
                               data={"type": type, "event": event.id}, created_at=now)
        waiting = Step.objects.filter(instance_id=inst.id, kind=StepKind.WAIT_EVENT, status=StepStatus.WAITING,
                                      event_type=type).exists()
        if waiting and inst.status == Status.WAITING:
            Instance.objects.filter(id=inst.id).update(ready_at=now, updated_at=now)
            notify.ready()
        elif waiting and inst.status == Status.PAUSED:
            Instance.objects.filter(id=inst.id).update(paused_ready_at=now)
    return event


# ---- dead letters -----------------------------------------------------------------------------


def dead_letter_discard(*, dead_letter_id: int, actor: str, reason: str) -> DeadLetter:
    if not reason.strip():
        raise DeadLetterError("discarding a dead letter needs a reason (it is kept in the history)")
    now = clock.now()
    with transaction.atomic():
        try:
            letter = DeadLetter.objects.select_for_update().get(id=dead_letter_id)
        except DeadLetter.DoesNotExist:
            raise DeadLetterError(f"no dead letter has the id {dead_letter_id}") from None
        if letter.state != DeadLetterState.OPEN:
            raise DeadLetterError(f"dead letter {letter.id} is already {letter.state} (by {letter.resolved_by or 'the engine'})")
        letter.state, letter.resolved_at, letter.resolved_by, letter.resolution = DeadLetterState.DISCARDED, now, actor, reason
        letter.save()
        inst = Instance.objects.get(id=letter.instance_id)
        _operator(inst, action="discard", actor=actor, reason=reason, now=now, dead_letter=letter.id)
    return letter


def dead_letter_select(*, workflow: str | None = None, step_name: str | None = None, signature: str | None = None,
                       tenant: str | Iterable[str] | None = None, since: datetime | None = None,
                       until: datetime | None = None, ids: Iterable[int] | None = None) -> Any:
    qs = DeadLetter.objects.filter(state=DeadLetterState.OPEN)
    if workflow:
        qs = qs.filter(workflow=workflow)
    if step_name:
        qs = qs.filter(step_name=step_name)
    if signature:
        qs = qs.filter(signature=signature)
    if isinstance(tenant, str):
        qs = qs.filter(tenant=tenant)
    elif tenant is not None:
        qs = qs.filter(tenant__in=list(tenant))
    if since:
        qs = qs.filter(created_at__gte=since)
    if until:
        qs = qs.filter(created_at__lt=until)
    if ids is not None:
        qs = qs.filter(id__in=list(ids))
    return qs.order_by("created_at", "id")


def dead_letter_redrive(*, rate_per_second: float = 5.0, actor: str, reason: str = "", **filters: Any) -> int:
    """Retry every selected dead letter from its failed step, at most `rate_per_second` starting per second.

    The cap holds without a thread waiting: retry i is scheduled to start i / rate seconds from now.
    """
    if not rate_per_second or rate_per_second <= 0:
        raise DeadLetterError(f"rate_per_second must be positive; got {rate_per_second!r}")
    now = clock.now()
    letters = list(dead_letter_select(**filters).values_list("instance_id", flat=True))
    for i, instance_id in enumerate(letters):
        start_at = now + timedelta(seconds=i / rate_per_second)
        try:
            instance_retry(instance_id=instance_id, actor=actor, reason=reason or "bulk redrive", start_at=start_at)
        except InvalidTransition:
            continue  # retried or restarted meanwhile: nothing to redrive
    return len(letters)


# ---- approvals and budgets ----------------------------------------------------------------------


def approval_answer(*, approval_id: int, approved: bool, values: dict[str, Any] | None = None, comment: str = "",
                    actor: str) -> ApprovalRequest:
    """Answer a request once; sends the event its instance waits for (or grants/denies a budget)."""
    now = clock.now()
    with transaction.atomic():
        try:
            req = ApprovalRequest.objects.select_for_update().get(id=approval_id)
        except ApprovalRequest.DoesNotExist:
            raise ApprovalError(f"no approval request has the id {approval_id}") from None
        if req.state != ApprovalState.PENDING:
            when = f" at {req.answered_at:%Y-%m-%d %H:%M} UTC" if req.answered_at else ""
            by = f" by {req.answered_by}" if req.answered_by else ""
            raise ApprovalError(f"approval request {req.id} was already {req.state}{by}{when}; it takes one answer")
        expired = req.due_at is not None and req.due_at <= now
        if not expired:
            answer = {"approved": bool(approved), "values": values or {}, "comment": comment, "by": actor}
            req.state = ApprovalState.APPROVED if approved else ApprovalState.REJECTED
            req.answer, req.answered_by, req.answered_at = answer, actor, now
            req.save()
            inst = Instance.objects.get(id=req.instance_id)
            _operator(inst, action="approve" if approved else "reject", actor=actor, reason=comment, now=now,
                      approval=req.id, values=values or {})
            # In the same transaction: an answer is recorded only if its instance gets it.
            if req.kind == ApprovalKind.HUMAN:
                instance_send_event(instance_id=req.instance_id, type=req.event_type, payload=answer, actor=actor)
            else:
                _answer_budget(req, approved=approved, values=values or {}, actor=actor, now=now)
                if inst.status in (Status.PAUSED, Status.WAITING_FOR_PAUSE):
                    instance_resume(instance_id=inst.id, actor=actor, reason=f"approval {req.id} answered")
    if expired:
        # Recorded outside the refused transaction, so the request shows as expired.
        ApprovalRequest.objects.filter(id=req.id, state=ApprovalState.PENDING).update(
            state=ApprovalState.EXPIRED, answered_at=now)
        raise ApprovalError(
            f"approval request {req.id} expired at {req.due_at:%Y-%m-%d %H:%M} UTC; it can no longer be answered")
    return req


def _answer_budget(req: ApprovalRequest, *, approved: bool, values: dict[str, Any], actor: str, now: datetime) -> None:
    if not approved or req.budget_id is None:
        return
    raw = values.get("amount", req.requested_amount)
    try:
        amount = Decimal(str(raw)).quantize(Decimal("0.000001"))
    except (InvalidOperation, ValueError):
        raise ApprovalError(f"amount {raw!r} is not a number") from None
    if amount <= 0:
        raise ApprovalError(f"amount {amount} must be positive")
    BudgetGrant.objects.create(budget_id=req.budget_id, instance_id=req.instance_id, amount=amount,
                               granted_by=actor, created_at=now)


def budget_upsert(*, scope: str, key: str, period: str, limit: Decimal | str | int, policy: str = "fail",
                  enabled: bool = True, actor: str = "") -> Budget:
    from ingest.engine.models import BreachPolicy, BudgetPeriod, BudgetScope

    if scope not in BudgetScope.values:
        raise InvalidParams(f"budget scope {scope!r} is not one of {', '.join(BudgetScope.values)}")
    if period not in BudgetPeriod.values:
        raise InvalidParams(f"budget period {period!r} is not one of {', '.join(BudgetPeriod.values)}")
    if policy not in BreachPolicy.values:
        raise InvalidParams(f"budget policy {policy!r} is not one of {', '.join(BreachPolicy.values)}")
    if not key:
        raise InvalidParams("a budget needs the key of its scope (a tenant, workflow, service or instance id)")
    try:
        amount = Decimal(str(limit)).quantize(Decimal("0.000001"))
    except (InvalidOperation, ValueError):
        raise InvalidParams(f"budget limit {limit!r} is not a number") from None
    if amount < 0:
        raise InvalidParams(f"budget limit {amount} must not be negative")
    now = clock.now()
    with transaction.atomic():
        budget, created = Budget.objects.select_for_update().get_or_create(
            scope=scope, key=key, period=period,
            defaults={"limit": amount, "policy": policy, "enabled": enabled,
                      "period_start": period_start(period, now), "updated_at": now},
        )
        before = str(budget.limit)
        if not created:
            budget.limit, budget.policy, budget.enabled, budget.updated_at = amount, policy, enabled, now
            budget.save()
        notify.history()
        History.objects.create(kind=HistoryKind.BUDGET, tenant=key if scope == "tenant" else "",
                               workflow=key if scope == "workflow" else "", actor=actor,
                               data={"action": "created" if created else "updated", "budget": budget.id,
                                     "scope": scope, "key": key, "period": period, "limit": str(amount),
                                     "previous": None if created else before, "policy": policy},
                               created_at=now)
    return budget
