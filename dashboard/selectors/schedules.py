"""Reads of the schedules page: every visible cron schedule, its next fires and last result."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ingest.engine.models import Instance
from ingest.triggers import selectors as trigger_selectors
from ingest.triggers.selectors import ScheduleRow


@dataclass(frozen=True)
class SchedulePageRow:
    schedule: ScheduleRow
    last_status: str  # "" when the last instance is gone or there was none


def schedule_page_rows(*, tenants: list[str], now: datetime, upcoming: int = 5) -> list[SchedulePageRow]:
    """The schedules of `tenants`, each with its next `upcoming` fires and its last instance's status."""
    rows = trigger_selectors.schedule_list(now=now, tenants=tenants, upcoming=upcoming)
    last_ids = [r.last_instance_id for r in rows if r.last_instance_id]
    statuses = dict(Instance.objects.filter(pk__in=last_ids).values_list("id", "status"))
    return [SchedulePageRow(r, statuses.get(r.last_instance_id, "")) for r in rows]


def schedule_page_get(*, name: str, tenants: list[str], now: datetime) -> ScheduleRow | None:
    row = trigger_selectors.schedule_get(name=name, now=now)
    return row if row is not None and row.tenant in tenants else None


def instance_status(*, instance_id: str) -> str:
    if not instance_id:
        return ""
    return Instance.objects.filter(pk=instance_id).values_list("status", flat=True).first() or ""
