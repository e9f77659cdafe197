"""Every write outside a worker's turn that starts or feeds an instance: creating instances (one
or a batch) and sending an instance an event.

Each function takes keyword-only arguments, checks the instance's status under a row lock, and
writes its history row (who, why) in the same transaction. Interfaces (dashboard, API, admin,
commands) call these services and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Any, TypedDict, Unpack

from django.db import IntegrityError, transaction

from ingest.engine import clock
from ingest.engine.conditions import Lead, RowUnchanged
from ingest.engine.errors import (
    BatchTooLarge,
    CheckedRowsChanged,
    InstanceAlreadyExists,
    InstanceFinished,
    InvalidParams,
)
from ingest.engine.models.history import History, HistoryKind, PendingEvent
from ingest.engine.models.instances import (
    FINISHED_STATUSES,
    Instance,
    Status,
    Step,
    StepKind,
    StepStatus,
)
from ingest.engine.secrets import seal_keys
from ingest.engine.services.base import (
    MAX_BATCH,
    check_params,
    created_history,
    created_history_values,
    locked,
    new_instance_values,
)
from ingest.engine.sql import create as sql_create
from ingest.engine.sql.base import is_postgres
from ingest.engine.workflow import get_workflow
from ingest.engine.writes import notify


class CreateOptions(TypedDict, total=False):
    """What `instance_create` and `instance_start` take besides the workflow; each is optional
    (the defaults: a generated id, no params, tenant "default", the workflow's priority, now)."""

    id: str | None
    params: Any
    tenant: str
    priority: int | None
    start_at: datetime | None
    actor: str
    only_if: RowUnchanged | None


def instance_create(
    *, workflow: str, first: Callable[[], object] | None = None, **options: Unpack[CreateOptions]
) -> Instance:
    """Create an instance; a duplicate id raises InstanceAlreadyExists (treat as already processed).

    `first` runs inside the instance's transaction before the insert (a caller's own row that
    must exist with the instance or not at all, e.g. an idempotency key): one transaction, no
    savepoint. An IntegrityError it raises rolls everything back and reaches the caller.
    `only_if` (PostgreSQL only, without `first`): the row the statement inserts under; when it
    has changed, nothing is written and CheckedRowsChanged is raised (before a duplicate id is
    reported: a duplicate is only "already processed" for a caller whose check still holds).
    """
    created = _created(workflow=workflow, first=first, **options)
    return created if isinstance(created, Instance) else Instance(**created)


def instance_start(*, workflow: str, **options: Unpack[CreateOptions]) -> str:
    """`instance_create` for a caller that needs only the new instance's id: on PostgreSQL the
    rows are written from their values, without building the instance's model."""
    created = _created(workflow=workflow, first=None, **options)
    return created.id if isinstance(created, Instance) else str(created["id"])


def _created(
    *, workflow: str, first: Callable[[], object] | None, **options: Unpack[CreateOptions]
) -> Instance | dict[str, Any]:
    """Create the instance: its field values when one statement wrote it, else its saved model."""
    only_if, actor = options.get("only_if"), options.get("actor", "")
    if only_if is not None and (first is not None or not is_postgres()):
        raise ValueError("only_if is checked by the one-statement create: PostgreSQL, without `first`")
    values = _options_values(workflow, options)
    if first is None and is_postgres():
        # One statement: a duplicate id inserts nothing instead of failing.
        with _contained():
            inserted, probe = sql_create.instance_insert(
                values, created_history_values(values, actor=actor), only_if=only_if
            )
        if not inserted:
            if only_if is not None and not probe[0]:
                raise CheckedRowsChanged(
                    f"what was checked before creating instance {values['id']!r} changed; "
                    "nothing was written — check it again"
                )
            raise InstanceAlreadyExists(values["id"])
        notify.history()
        notify.ready()
        return values
    inst = Instance(**values)
    try:
        with transaction.atomic():
            if first is not None:
                first()
            inst.save(force_insert=True)
            created_history(inst, actor=actor).save()
            notify.ready()
    except IntegrityError:
        if Instance.objects.filter(id=inst.id).exists():
            raise InstanceAlreadyExists(inst.id) from None
        raise
    return inst


def _contained() -> AbstractContextManager[object]:
    """Outside a transaction a statement is its own (one round trip); inside the caller's, a
    savepoint, so a failing statement leaves the caller's transaction usable, as the ORM's
    nested atomic did."""
    return transaction.atomic() if transaction.get_connection().in_atomic_block else nullcontext()


def _options_values(workflow: str, options: CreateOptions) -> dict[str, Any]:
    """A new instance's checked field values from `instance_create`'s options, their defaults filled."""
    return new_instance_values(
        workflow=workflow,
        id=options.get("id"),
        params=options.get("params"),
        tenant=options.get("tenant", "default"),
        priority=options.get("priority"),
        start_at=options.get("start_at"),
        now=clock.now(),
    )


def instance_create_behind(
    *, lead: Lead, workflow: str, **options: Unpack[CreateOptions]
) -> tuple[bool, tuple[Any, ...]]:
    """Create an instance behind the caller's own insert `lead` (PostgreSQL only), in one
    statement: the instance and its history are written only if the lead's insert returned a
    row. (created, the lead's probe row). A duplicate instance id raises IntegrityError and
    writes nothing. `only_if` does not apply: the lead is the check."""
    if options.get("only_if") is not None:
        raise ValueError("instance_create_behind checks its lead, not only_if")
    values = _options_values(workflow, options)
    actor = options.get("actor", "")
    with _contained():
        created, probe = sql_create.instance_insert(values, created_history_values(values, actor=actor), lead=lead)
    if created:
        notify.history()
        notify.ready()
    return created, probe


def instance_defer(*, instance_id: str, params: Any, start_at: datetime) -> bool:
    """Give a queued instance that never ran new params and a new start time (the triggers'
    debounce and batch windows feed their pending instance this way).

    Under the instance's row lock: False, changing nothing, when a worker has claimed it
    already (or it is gone); the caller then opens a new window. A worker's claim skips the
    locked row, so an instance is either updated here or started, never both.
    """
    with transaction.atomic():
        inst = (
            Instance.objects.select_for_update()
            .filter(id=instance_id)
            .only("id", "workflow", "status", "started_at", "lease_owner")
            .first()
        )
        if inst is None or inst.status != Status.QUEUED or inst.started_at is not None or inst.lease_owner:
            return False
        checked = check_params(params)
        cls = get_workflow(inst.workflow)
        if cls.sensitive_params:
            checked = seal_keys(checked, cls.sensitive_params)
        now = clock.now()
        Instance.objects.filter(id=instance_id).update(params=checked, ready_at=max(start_at, now), updated_at=now)
        notify.ready()
    return True


def instance_create_batch(*, workflow: str, items: Iterable[dict[str, Any]], actor: str = "") -> list[Instance]:
    """Create up to 100 instances at once, all or none; a duplicate id raises InstanceAlreadyExists."""
    items = list(items)
    if len(items) > MAX_BATCH:
        raise BatchTooLarge(f"create_batch got {len(items)} instances; the limit is {MAX_BATCH} per call")
    now = clock.now()
    instances = [
        Instance(
            **new_instance_values(
                workflow=workflow,
                id=item.get("id"),
                params=item.get("params"),
                tenant=item.get("tenant", "default"),
                priority=item.get("priority"),
                start_at=item.get("start_at"),
                now=now,
            )
        )
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
        History.objects.bulk_create([created_history(i, actor=actor) for i in instances])
        notify.ready()
    return instances


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
        inst = locked(instance_id)
        if inst.status in FINISHED_STATUSES:
            raise InstanceFinished(
                f"cannot send event {type!r} to instance {inst.id}: it is {inst.status} and takes no more events"
            )
        event = PendingEvent.objects.create(instance=inst, type=type, payload=payload, created_at=now, sender=actor)
        notify.history()
        History.objects.create(
            instance_id=inst.id,
            workflow=inst.workflow,
            tenant=inst.tenant,
            kind=HistoryKind.EVENT_RECEIVED,
            actor=actor,
            data={"type": type, "event": event.id},
            created_at=now,
        )
        waiting = Step.objects.filter(
            instance_id=inst.id, kind=StepKind.WAIT_EVENT, status=StepStatus.WAITING, event_type=type
        ).exists()
        if waiting and inst.status == Status.WAITING:
            Instance.objects.filter(id=inst.id).update(ready_at=now, updated_at=now)
            notify.ready()
        elif waiting and inst.status == Status.PAUSED:
            Instance.objects.filter(id=inst.id).update(paused_ready_at=now)
    return event
