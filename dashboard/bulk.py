"""Bulk actions by query over the instances list: the preview that freezes what it counted, the
drift since, and the confirm. Shared by the pages (dashboard.views.bulk) and the REST API.

The rule: a bulk action acts on exactly the ids its preview counted, inside the user's acting
tenants. The preview freezes them (ingest.engine.services.batches); a confirm never re-reads the
filters to decide what to act on, it only reports how the matching set moved since. An empty
filter, or one with a value that does not parse, previews nothing and freezes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.http import QueryDict

from dashboard import access
from dashboard.actions import ACTIONS, failed_for_good
from dashboard.selectors.instance_filters import InstanceFilters
from dashboard.selectors.instance_matches import instance_filtered
from ingest.engine.models import Batch, BatchItem, Instance, Step, StepKind, StepStatus
from ingest.engine.services import batches

BULK_ACTIONS: tuple[str, ...] = batches.ACTIONS


class BulkRefused(Exception):
    """The bulk action was refused; nothing was done."""

    def __init__(self, message: str | None = None, *, status: int = 400) -> None:
        super().__init__(message or self.__doc__)
        self.status = status


@dataclass(frozen=True)
class Preview:
    batch: Batch
    filters: InstanceFilters
    not_applicable: int  # match the filters, in the user's acting tenants, but the action does not apply
    read_only: int  # match the filters in tenants the user only reads: never acted on
    sample: list[str]  # the first ids of the frozen set


@dataclass(frozen=True)
class Drift:
    """How the matching set moved between the preview and now (the action ignores both)."""

    added: int  # match now, were not previewed: not acted on
    removed: int  # previewed, no longer match: acted on if the action still applies, else skipped

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


def bulk_filters(query: QueryDict) -> InstanceFilters:
    filters = InstanceFilters.from_query(query)
    if filters.problems:
        raise BulkRefused("the filters do not parse: " + "; ".join(filters.problems) + " — nothing was done")
    if not filters.active:
        raise BulkRefused(
            "a bulk action needs at least one filter (an empty filter never means every instance); nothing was done"
        )
    return filters


def _eligible(user: Any, filters: InstanceFilters, action: str, tenants: list[str]) -> QuerySet[Instance]:
    return instance_filtered(user=user, filters=filters).filter(
        status__in=sorted(ACTIONS[action].when), tenant__in=tenants
    )


def bulk_preview(*, user: Any, query: QueryDict, action: str) -> Preview:
    """Freeze the instances the filters match now, in the user's acting tenants, that the action
    applies to; count what is left out and why."""
    if action not in BULK_ACTIONS:
        raise BulkRefused(f"unknown bulk action {action[:40]!r}; one of {', '.join(BULK_ACTIONS)}")
    filters = bulk_filters(query)
    acting = access.acting_tenants(user)
    if filters.tenant and filters.tenant not in access.tenants_for(user):
        raise BulkRefused(f"no tenant {filters.tenant[:100]!r} among yours", status=404)
    if not acting:
        raise BulkRefused("bulk actions need the operator role in a tenant", status=403)
    matching = instance_filtered(user=user, filters=filters)
    batch = batches.batch_preview(
        action=action,
        selection=_eligible(user, filters, action, acting),
        tenants=acting,
        user_id=str(user.pk),
        actor=user.get_username(),
        query=filters.querystring(),
    )
    # Both counts in one read of the matches (the freeze above was the other).
    counts = matching.aggregate(all=Count("id"), acting=Count("id", filter=Q(tenant__in=acting)))
    in_acting, read_only = counts["acting"], counts["all"] - counts["acting"]
    sample = list(BatchItem.objects.filter(batch=batch).order_by("id").values_list("instance_id", flat=True)[:20])
    return Preview(batch, filters, max(0, in_acting - batch.total), read_only, sample)


def bulk_get(*, user: Any, batch_id: int) -> Batch:
    """A batch the user previewed or may see: previewed ones only by their author, started ones by
    anyone who reads every tenant it acts in."""
    batch = Batch.objects.filter(id=batch_id).first()
    if batch is None:
        raise BulkRefused(f"no bulk action {batch_id}", status=404)
    if batch.user_id == str(user.pk):
        return batch
    mine = set(access.tenants_for(user))
    tenants = set(BatchItem.objects.filter(batch=batch).values_list("tenant", flat=True).distinct())
    if batch.state == "previewed" or not tenants or not tenants <= mine:
        raise BulkRefused(f"no bulk action {batch_id}", status=404)
    return batch


def bulk_drift(*, user: Any, batch: Batch) -> Drift:
    """Compare the frozen set with what the same filters match now (same tenants, same statuses)."""
    filters = InstanceFilters.from_query(QueryDict(batch.query))
    if filters.problems or not filters.active:
        return Drift(0, 0)
    current = _eligible(user, filters, batch.action, list(batch.tenants)).values("id")
    frozen = BatchItem.objects.filter(batch=batch).values("instance_id")
    added = _eligible(user, filters, batch.action, list(batch.tenants)).exclude(id__in=frozen).count()
    removed = BatchItem.objects.filter(batch=batch).exclude(instance_id__in=current).count()
    return Drift(added, removed)


def bulk_failed_for_good(*, batch: Batch) -> list[str]:
    """Of a bulk retry's frozen instances, the ones whose failed step failed for good
    (NonRetryableError): retried, they fail the same way. Sorted ids; empty for other actions."""
    if batch.action != "retry":
        return []
    steps = (
        Step.objects.filter(
            instance_id__in=BatchItem.objects.filter(batch=batch).values("instance_id"), status=StepStatus.ERRORED
        )
        .exclude(kind=StepKind.ROLLBACK)
        .values_list("instance_id", "error_name", "attempts", "config")
    )
    return sorted(
        {
            instance_id
            for instance_id, error_name, attempts, config in steps.iterator(chunk_size=2000)
            if failed_for_good(
                status="errored",
                error_name=error_name,
                attempts=attempts,
                config=config if isinstance(config, dict) else {},
            )
        }
    )
