"""The audit log as a reader sees it: entries of the reader's tenants, filtered, newest first,
keyset-paginated by id (stable while new entries arrive). Used by the Audit page and /api/audit."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet

from dashboard.models import AuditEntry, AuditSource, AuditTenant
from dashboard.query_params import QueryReader
from dashboard.selectors.common import filter_given

AUDIT_PAGE = 50


@dataclass(frozen=True)
class AuditFilters:
    action: str = ""
    actor: str = ""
    source: str = ""
    tenant: str = ""

    @classmethod
    def from_query(cls, data: Any) -> AuditFilters:
        """The filters in `data` (the page's query, the API's parsed one); BadQuery names each
        value that does not parse."""
        reader = QueryReader(data)
        filters = cls(
            action=reader.text("action", max_chars=60),
            actor=reader.text("actor", max_chars=150),
            source=reader.choice("source", AuditSource.values),
            tenant=reader.text("tenant", max_chars=100),
        )
        reader.done()
        return filters

    def as_params(self) -> dict[str, str]:
        return {k: v for k, v in vars(self).items() if v}


@dataclass(frozen=True)
class AuditPage:
    rows: list[AuditEntry]
    next_before: int | None


def audit_visible(*, tenants: Collection[str], see_global: bool = False) -> QuerySet[AuditEntry]:
    """Entries every one of whose tenants the reader reads; entries of no tenant (global budgets)
    only for readers who see global objects (staff)."""
    mine = list(tenants)
    theirs = AuditTenant.objects.filter(entry=OuterRef("pk")).exclude(tenant__in=mine)
    any_tenant = AuditTenant.objects.filter(entry=OuterRef("pk"))
    in_mine = AuditTenant.objects.filter(entry=OuterRef("pk"), tenant__in=mine)
    visible = Q(Exists(in_mine)) & ~Q(Exists(theirs))
    if see_global:
        visible |= ~Q(Exists(any_tenant))
    return AuditEntry.objects.filter(visible)


def audit_page(
    *,
    tenants: Collection[str],
    see_global: bool,
    filters: AuditFilters,
    before: int | None = None,
    limit: int = AUDIT_PAGE,
) -> AuditPage:
    qs = filter_given(
        audit_visible(tenants=tenants, see_global=see_global),
        [
            ("action", filters.action),
            ("actor", filters.actor),
            ("source", filters.source),
        ],
    )
    if filters.tenant:
        qs = qs.filter(Exists(AuditTenant.objects.filter(entry=OuterRef("pk"), tenant=filters.tenant)))
    if before is not None:
        qs = qs.filter(Q(id__lt=before))
    limit = max(1, min(limit, 200))
    rows = list(qs.order_by("-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return AuditPage(rows, rows[-1].id if more and rows else None)


def audit_actions(*, tenants: Collection[str], see_global: bool) -> list[str]:
    """The action names the reader's entries use, for the filter's choices."""
    return sorted(
        set(audit_visible(tenants=tenants, see_global=see_global).values_list("action", flat=True).distinct()[:200])
    )
