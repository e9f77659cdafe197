"""The instance API as Cloudflare Workflows offers it: create, create_batch, get, and a handle."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from ingest.engine import selectors
from ingest.engine.conditions import RowUnchanged
from ingest.engine.errors import InstanceNotFound
from ingest.engine.models import Instance
from ingest.engine.services import control as svc_control
from ingest.engine.services import instances as svc_instances


class InstanceHandle:
    """A reference to one instance; every method reads or writes the ledger afresh."""

    def __init__(self, instance_id: str) -> None:
        self.id = instance_id

    def __repr__(self) -> str:
        return f"InstanceHandle({self.id!r})"

    def status(self) -> dict[str, Any]:
        return selectors.instance_status(instance_id=self.id)

    def pause(self, *, actor: str = "", reason: str = "") -> None:
        svc_control.instance_pause(instance_id=self.id, actor=actor, reason=reason)

    def resume(self, *, actor: str = "", reason: str = "") -> None:
        svc_control.instance_resume(instance_id=self.id, actor=actor, reason=reason)

    def terminate(self, *, rollback: bool = False, actor: str = "", reason: str = "") -> None:
        svc_control.instance_terminate(instance_id=self.id, rollback=rollback, actor=actor, reason=reason)

    def restart(self, from_step: str | None = None, *, actor: str = "", reason: str = "") -> None:
        svc_control.instance_restart(instance_id=self.id, from_step=from_step, actor=actor, reason=reason)

    def send_event(self, type: str, payload: Any = None, *, actor: str = "") -> None:
        svc_instances.instance_send_event(instance_id=self.id, type=type, payload=payload, actor=actor)


# Kept as a mirror of services.instances.instance_create on purpose: this is the public signature authors
# read and their editors show, so it is spelled out rather than forwarded (the service adds `first`).
def create(
    workflow: str,
    *,
    id: str | None = None,
    params: Any = None,
    tenant: str = "default",
    priority: int | None = None,
    start_at: datetime | None = None,
    actor: str = "",
    only_if: RowUnchanged | None = None,
) -> InstanceHandle:
    """Create an instance of `workflow`. A duplicate id raises InstanceAlreadyExists.

    `only_if` (PostgreSQL): a row that must still say what the caller read (`RowUnchanged`); when
    it has changed nothing is written and CheckedRowsChanged is raised."""
    instance_id = svc_instances.instance_start(
        workflow=workflow,
        id=id,
        params=params,
        tenant=tenant,
        priority=priority,
        start_at=start_at,
        actor=actor,
        only_if=only_if,
    )
    return InstanceHandle(instance_id)


def create_batch(workflow: str, items: Iterable[dict[str, Any]], *, actor: str = "") -> list[InstanceHandle]:
    """Create up to 100 instances in one transaction; items are {"id", "params", "tenant"} dicts."""
    return [
        InstanceHandle(i.id) for i in svc_instances.instance_create_batch(workflow=workflow, items=items, actor=actor)
    ]


def get(instance_id: str) -> InstanceHandle:
    if not Instance.objects.filter(id=instance_id).exists():
        raise InstanceNotFound(instance_id)
    return InstanceHandle(instance_id)
