"""Concurrency limits per workflow and tenant as the Limits page and /api/limits show them: the
cap that holds for each (workflow, tenant) and where it comes from, and how many of its
instances run (hold a live lease) and wait (runnable, unleased) right now.

Only the workflows whose concurrency key is the tenant are listed: their key values are tenants,
so a member of a tenant sees its rows and an operator of it may change them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q

from ingest.engine.models import FINISHED_STATUSES, ConcurrencyLimit, Instance, Status
from ingest.engine.services.limits import keyed_workflows, limit_version

TENANT_KEY = "tenant"


@dataclass(frozen=True)
class LimitRow:
    """One workflow and tenant: its cap, where the cap comes from, and what runs now."""

    workflow: str
    tenant: str
    max_concurrent: int | None  # the cap that holds now; None: no cap (served round robin only)
    source: str  # "console" (an operator's limit), "settings", "workflow" (its default cap) or "none"
    workflow_default: int | None  # the workflow's own cap per tenant, when no limit of the tenant's
    running: int
    waiting: int
    version: str  # send it back to change or remove the operator's limit ("0": none is set)
    updated_by: str = ""
    updated_at: datetime | None = None


@dataclass(frozen=True)
class LimitWorkflow:
    name: str
    default: int | None
    settings: dict[str, int]


def limit_workflows() -> list[LimitWorkflow]:
    """The workflows a limit may cap from the console: keyed by tenant."""
    return [
        LimitWorkflow(cls.name, cls.concurrency, dict(cls.concurrency_overrides or {}))
        for cls in keyed_workflows()
        if cls.concurrency_key == TENANT_KEY
    ]


def limit_rows(*, tenants: Collection[str], now: datetime, workflow: str = "") -> list[LimitRow]:
    """Every (workflow, tenant) of the visible tenants that has a limit or instances running or
    waiting now, by workflow then tenant."""
    flows = {w.name: w for w in limit_workflows() if not workflow or w.name == workflow}
    visible = list(tenants)
    set_rows = {
        (r.workflow, r.key): r for r in ConcurrencyLimit.objects.filter(workflow__in=list(flows), key__in=visible)
    }
    live = Q(lease_expires_at__gte=now) & ~Q(lease_owner="")
    ready = (
        Q(ready_at__lte=now)
        & ~Q(status__in=[*sorted(FINISHED_STATUSES), Status.PAUSED])
        & (Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
    )
    counts = (
        Instance.objects.filter(workflow__in=list(flows), concurrency_key__in=visible)
        .filter(live | ready)
        .values("workflow", "concurrency_key")
        .annotate(running=Count("id", filter=live), waiting=Count("id", filter=ready))
    )
    now_by = {(c["workflow"], c["concurrency_key"]): (c["running"], c["waiting"]) for c in counts}
    keys = set(set_rows) | set(now_by)
    keys |= {(w.name, t) for w in flows.values() for t in w.settings if t in visible}
    rows = []
    for name, tenant in sorted(keys):
        flow, row = flows[name], set_rows.get((name, tenant))
        running, waiting = now_by.get((name, tenant), (0, 0))
        cap: int | None
        if row is not None:
            cap, source = row.max_concurrent, "console"
        elif tenant in flow.settings:
            cap, source = flow.settings[tenant], "settings"
        else:
            cap, source = flow.default, "workflow" if flow.default is not None else "none"
        rows.append(
            LimitRow(
                workflow=name,
                tenant=tenant,
                max_concurrent=cap,
                source=source,
                workflow_default=flow.default,
                running=running,
                waiting=waiting,
                version=limit_version(row),
                updated_by=row.updated_by if row else "",
                updated_at=row.updated_at if row else None,
            )
        )
    return rows


def limit_row(*, workflow: str, tenant: str, now: datetime) -> LimitRow | None:
    found = [r for r in limit_rows(tenants=[tenant], now=now, workflow=workflow) if r.tenant == tenant]
    return found[0] if found else None
