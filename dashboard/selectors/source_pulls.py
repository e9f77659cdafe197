"""The scheduled pulls of the Gong and Salesforce connections, for the workflows page: how far
each connection's cursor has reached, how far behind now it is, the last pull and its error, and
the tenant's `reconcile-<tenant>` schedule that fires them."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from ingest.pipelines.selectors import CursorRow, connection_cursor_list
from ingest.triggers.models import Schedule
from ingest.workflows.reconcile import reconcile_schedule_name


@dataclass(frozen=True)
class SourcePullRow:
    pull: CursorRow
    schedule: str  # the tenant's reconcile schedule, "" while the scheduler has not made it
    schedule_enabled: bool


def source_pull_rows(*, tenants: Collection[str], now: datetime) -> list[SourcePullRow]:
    """Every Gong and Salesforce connection of `tenants`, with its pull and its schedule."""
    pulls = connection_cursor_list(tenants=tenants, now=now)
    names = {reconcile_schedule_name(p.tenant) for p in pulls}
    schedules = dict(Schedule.objects.filter(name__in=names, tenant__in=list(tenants)).values_list("name", "enabled"))
    rows = []
    for pull in pulls:
        name = reconcile_schedule_name(pull.tenant)
        rows.append(SourcePullRow(pull, name if name in schedules else "", schedules.get(name, False)))
    return rows
