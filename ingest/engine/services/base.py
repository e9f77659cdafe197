"""What every operator service shares: the checks of an instance id and its params, a new
instance row, the row lock an action takes, and the history rows it writes (who, why)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ingest.engine import tracing
from ingest.engine.errors import (
    InstanceAlreadyExists,
    InstanceFinished,
    InstanceNotFound,
    InvalidInstanceId,
    InvalidParams,
)
from ingest.engine.models import (
    History,
    HistoryKind,
    Instance,
    Status,
)
from ingest.engine.models.instances import ID_PATTERN
from ingest.engine.secrets import REDACTED, is_sealed_value, seal_keys
from ingest.engine.workflow import get_workflow
from ingest.engine.writes import notify

MAX_BATCH = 100


MAX_PARAMS_BYTES = 1024 * 1024


def check_id(instance_id: str) -> None:
    if not isinstance(instance_id, str) or len(instance_id) > 100 or not ID_PATTERN.match(instance_id):
        shown = instance_id[:120] if isinstance(instance_id, str) else instance_id
        raise InvalidInstanceId(
            f"instance id {shown!r} is invalid: ids are 1–100 characters of letters, digits, '_' "
            "and '-', and do not start with '-'"
        )


def check_params(params: Any) -> dict[str, Any]:
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


def new_instance_values(
    *,
    workflow: str,
    id: str | None,
    params: Any,
    tenant: str,
    priority: int | None,
    start_at: datetime | None,
    now: datetime,
    replay_of: str | None = None,
    version: int | None = None,
) -> dict[str, Any]:
    """A new instance's field values by attribute name, checked: what an unsaved `Instance(**…)` is
    built from, and what the one-statement create writes without building one."""
    cls = get_workflow(workflow)
    instance_id = id if id is not None else generated_id(workflow, now)
    check_id(instance_id)
    if not isinstance(tenant, str) or not tenant.strip() or len(tenant) > 100:
        raise InvalidParams(f"tenant {tenant!r} must be a non-empty string of at most 100 characters")
    checked = check_params(params)
    key = ""
    if cls.concurrency_key:
        key = str(checked.get(cls.concurrency_key, tenant if cls.concurrency_key == "tenant" else ""))[:200]
    if cls.sensitive_params:
        checked = seal_keys(checked, cls.sensitive_params)
    return {
        "id": instance_id,
        "workflow": workflow,
        "tenant": tenant,
        "status": Status.QUEUED,
        "params": checked,
        "created_at": now,
        "updated_at": now,
        "ready_at": max(start_at, now) if start_at else now,
        "priority": cls.priority if priority is None else priority,
        "concurrency_key": key,
        "replay_of_id": replay_of,
        "workflow_version": cls.version if version is None else version,
    }


def rerun_instance(
    source: Instance,
    *,
    new_id: str,
    params: Any,
    now: datetime,
    replay_of: str | None = None,
    version: int | None = None,
) -> Instance:
    """A new, unsaved instance that runs `source`'s workflow again in its tenant at its priority,
    with `params` (None: the source's); InstanceAlreadyExists when `new_id` is taken."""
    inst = Instance(
        **new_instance_values(
            workflow=source.workflow,
            id=new_id,
            tenant=source.tenant,
            params=source.params if params is None else params,
            priority=source.priority,
            start_at=None,
            now=now,
            replay_of=replay_of,
            version=version,
        )
    )
    if Instance.objects.filter(id=inst.id).exists():
        raise InstanceAlreadyExists(inst.id)
    return inst


def rerun_params(original: Any, params: Any) -> Any:
    """The params of a replay or a fork: `params` as edited, where a sensitive param shown as
    "redacted" (or left sealed) keeps the original's value."""
    if isinstance(params, dict) and isinstance(original, dict):
        return {
            k: original[k]
            if k in original and is_sealed_value(original[k]) and (v == REDACTED or is_sealed_value(v))
            else v
            for k, v in params.items()
        }
    return params


def derived_id(source_id: str, kind: str, taken: Any) -> str:
    """`<source>-<kind>-<n>` with the first n not `taken(id)`, within the 100-character limit."""
    n = 1
    while taken(candidate := f"{source_id[:88]}-{kind}-{n}"):
        n += 1
    return candidate


def generated_id(workflow: str, now: datetime) -> str:
    import secrets

    return f"{workflow[:60]}-{now:%Y%m%d%H%M%S}-{secrets.token_hex(4)}".replace(".", "-")


def created_history(inst: Instance, *, actor: str, reason: str = "", **data: Any) -> History:
    notify.history()
    return created_history_row(inst, actor=actor, reason=reason, **data)


def created_history_row(inst: Instance, *, actor: str, reason: str = "", **data: Any) -> History:
    """The creation's history row, unannounced: the caller calls notify.history() once it is
    written (in autocommit, an announcement before the write could be read before it)."""
    values = {"id": inst.id, "workflow": inst.workflow, "tenant": inst.tenant, "created_at": inst.created_at}
    return History(**created_history_values(values, actor=actor, reason=reason, **data))


def created_history_values(instance: dict[str, Any], *, actor: str, reason: str = "", **data: Any) -> dict[str, Any]:
    """`created_history_row`'s field values by attribute name, for the instance whose values are
    `instance` (as `new_instance_values` gives them)."""
    if (traceparent := tracing.incoming.get()) is not None:  # the ingress request that started it
        data["traceparent"] = traceparent
    return {
        "instance_id": instance["id"],
        "workflow": instance["workflow"],
        "tenant": instance["tenant"],
        "kind": HistoryKind.INSTANCE_CREATED,
        "status": Status.QUEUED,
        "actor": actor,
        "reason": reason,
        "data": data,
        "created_at": instance["created_at"],
    }


def locked(instance_id: str) -> Instance:
    try:
        return Instance.objects.select_for_update().get(id=instance_id)
    except Instance.DoesNotExist:
        raise InstanceNotFound(instance_id) from None


def operator_history(inst: Instance, *, action: str, actor: str, reason: str, now: datetime, **data: Any) -> None:
    notify.history()
    History.objects.create(
        instance_id=inst.id,
        workflow=inst.workflow,
        tenant=inst.tenant,
        kind=HistoryKind.OPERATOR,
        status=inst.status,
        actor=actor,
        reason=reason,
        data={"action": action, **data},
        created_at=now,
    )


def status_history(inst: Instance, *, now: datetime, actor: str = "", reason: str = "") -> None:
    History.objects.create(
        instance_id=inst.id,
        workflow=inst.workflow,
        tenant=inst.tenant,
        kind=HistoryKind.INSTANCE_STATUS,
        status=inst.status,
        actor=actor,
        reason=reason,
        created_at=now,
    )


def finished_error(inst: Instance, action: str) -> InstanceFinished:
    return InstanceFinished(
        f"cannot {action} instance {inst.id}: it is {inst.status} — restart or replay it to run it again"
    )


def is_leased(inst: Instance, now: datetime) -> bool:
    return bool(inst.lease_token) and inst.lease_expires_at is not None and inst.lease_expires_at > now
