"""The history table as the live feed reads it: the newest id, and what a reconnecting
browser missed."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Max

from ingest.engine.models import (
    History,
)

# ---- the live feed -----------------------------------------------------------------------


def history_cursor() -> int:
    """The newest history id now: a page rendered now has seen everything up to it."""
    return History.objects.aggregate(m=Max("id"))["m"] or 0


@dataclass(frozen=True)
class Change:
    """What one history row tells the live feed (a TypedDict-free value: consumers use it)."""

    id: int
    instance_id: str | None
    tenant: str
    kind: str
    status: str
    step_name: str = ""


def history_changes(
    *, tenants: list[str], instance_id: str | None = None, after: int, limit: int = 5000
) -> list[Change]:
    """History rows after `after` visible to these tenants (or of one instance), ids ascending:
    what a reconnecting browser missed."""
    qs = History.objects.filter(id__gt=after, tenant__in=tenants)
    if instance_id is not None:
        qs = qs.filter(instance_id=instance_id)
    rows = qs.order_by("id").values_list("id", "instance_id", "tenant", "kind", "status", "step_name")[:limit]
    return [Change(*row) for row in rows]
