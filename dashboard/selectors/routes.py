"""Reads of the routes and subscriptions pages: what starts which workflow, the recent deliveries
and their outcome, the debounce or batch windows still open, and the tenants' ingress credentials
(their prefixes only: a token or secret is never read back)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q

from ingest.engine.models import Instance
from ingest.triggers import patterns
from ingest.triggers.models import (
    CoalesceWindow,
    IngressSecret,
    PublishedEvent,
    Route,
    Subscription,
)

_ID_SAFE = re.compile(r"[^A-Za-z0-9_-]")
# Published events scanned for a subscription's recent deliveries (newest first).
EVENT_SCAN = 500


@dataclass(frozen=True)
class Delivery:
    instance_id: str
    status: str  # "" when the instance is gone (retention)
    at: datetime
    event_id: str = ""
    event_type: str = ""


@dataclass(frozen=True)
class Window:
    key: str
    mode: str
    events: int
    starts_at: datetime
    instance_id: str


@dataclass(frozen=True)
class RouteRow:
    name: str
    workflow: str
    tenant: str
    enabled: bool
    description: str
    coalesce: dict[str, Any]
    rate_limit_per_minute: int | None
    deliveries: list[Delivery]
    windows: list[Window]
    sync_default: bool
    wait_seconds: float
    idempotency_ttl_seconds: int
    priority: int


@dataclass(frozen=True)
class SubscriptionRow:
    id: int
    pattern: str
    workflow: str
    tenant: str  # "" : every tenant's events
    filters: dict[str, Any]
    enabled: bool
    coalesce: dict[str, Any]
    deliveries: list[Delivery]
    windows: list[Window]


@dataclass(frozen=True)
class Credential:
    tenant: str
    name: str
    token_prefix: str
    enabled: bool
    created_at: datetime
    rate_limit_per_minute: int | None
    rotated_at: datetime | None
    # The pair the last rotation replaced, while it still works (its overlap): its prefix and end.
    previous_token_prefix: str | None
    previous_valid_until: datetime | None


def windows_open(*, source: str, now: datetime) -> list[Window]:
    """The source's windows holding a queued instance that has not started yet."""
    rows = CoalesceWindow.objects.filter(source=source, starts_at__gt=now).exclude(instance_id="").order_by("starts_at")
    return [Window(w.key, w.mode, w.count, w.starts_at, w.instance_id) for w in rows]


def _route_prefixes(name: str) -> Q:
    # Direct starts are `<name>-<hex>`; coalesced ones `route-<name>-<mode>-<window>-<n>`.
    base = _ID_SAFE.sub("-", name)[:60].lstrip("-") or "route"
    return Q(id__startswith=f"{base}-") | Q(id__startswith=f"route-{base}-")


def route_deliveries(*, route: Route, limit: int = 10) -> list[Delivery]:
    rows = (
        Instance.objects.filter(workflow=route.workflow, tenant=route.tenant)
        .filter(_route_prefixes(route.name))
        .order_by("-created_at")
        .values_list("id", "status", "created_at")[:limit]
    )
    return [Delivery(i, s, at) for i, s, at in rows]


def _route_row(route: Route, *, now: datetime, limit: int) -> RouteRow:
    return RouteRow(
        route.name,
        route.workflow,
        route.tenant,
        route.enabled,
        route.description,
        route.coalesce or {},
        route.rate_limit_per_minute,
        route_deliveries(route=route, limit=limit),
        windows_open(source=f"route:{route.name}", now=now),
        route.sync_default,
        route.wait_seconds,
        route.idempotency_ttl_seconds,
        route.priority,
    )


def route_rows(*, tenants: list[str], now: datetime, limit: int = 5) -> list[RouteRow]:
    return [_route_row(r, now=now, limit=limit) for r in Route.objects.filter(tenant__in=tenants).order_by("name")]


def route_page_get(*, name: str, tenants: list[str], now: datetime, limit: int = 20) -> RouteRow | None:
    route = Route.objects.filter(name=name, tenant__in=tenants).first()
    return None if route is None else _route_row(route, now=now, limit=limit)


def _sub_visible(*, tenants: list[str], see_global: bool) -> Q:
    return Q(tenant__in=tenants) | (Q(tenant="") if see_global else Q(pk__in=[]))


def subscription_deliveries(*, sub: Subscription, tenants: list[str], limit: int = 10) -> list[Delivery]:
    """The recent events of `tenants` this subscription matched, each with the instance it started."""
    events = PublishedEvent.objects.filter(tenant__in=[sub.tenant] if sub.tenant else tenants)
    prefixes = (f"evt-{sub.pk}-", f"subscription-{sub.pk}-")
    out: list[Delivery] = []
    for event in events.order_by("-created_at")[:EVENT_SCAN]:
        if not patterns.type_matches(sub.pattern, event.type):
            continue
        started = [i for i in event.started if str(i).startswith(prefixes)]
        if started:
            out.append(Delivery(started[0], "", event.created_at, event.id, event.type))
        if len(out) >= limit:
            break
    statuses = dict(Instance.objects.filter(pk__in=[d.instance_id for d in out]).values_list("id", "status"))
    return [Delivery(d.instance_id, statuses.get(d.instance_id, ""), d.at, d.event_id, d.event_type) for d in out]


def _sub_row(sub: Subscription, *, tenants: list[str], now: datetime, limit: int) -> SubscriptionRow:
    return SubscriptionRow(
        sub.pk,
        sub.pattern,
        sub.workflow,
        sub.tenant,
        sub.filters or {},
        sub.enabled,
        sub.coalesce or {},
        subscription_deliveries(sub=sub, tenants=tenants, limit=limit),
        [w for w in windows_open(source=f"subscription:{sub.pk}", now=now) if _window_tenant_visible(w, tenants)],
    )


def _window_tenant_visible(window: Window, tenants: list[str]) -> bool:
    # A global subscription's windows hold the events of every tenant: show those of the reader's.
    return Instance.objects.filter(pk=window.instance_id, tenant__in=tenants).exists()


def subscription_rows(*, tenants: list[str], see_global: bool, now: datetime, limit: int = 5) -> list[SubscriptionRow]:
    subs = Subscription.objects.filter(_sub_visible(tenants=tenants, see_global=see_global)).order_by("pk")
    return [_sub_row(s, tenants=tenants, now=now, limit=limit) for s in subs]


def subscription_page_get(
    *, subscription_id: int, tenants: list[str], see_global: bool, now: datetime, limit: int = 20
) -> SubscriptionRow | None:
    sub = (
        Subscription.objects.filter(_sub_visible(tenants=tenants, see_global=see_global))
        .filter(pk=subscription_id)
        .first()
    )
    return None if sub is None else _sub_row(sub, tenants=tenants, now=now, limit=limit)


def _credential(row: tuple[Any, ...], now: datetime) -> Credential:
    tenant, name, prefix, enabled, created_at, rate, rotated_at, previous_prefix, until = row
    live = until is not None and until > now
    return Credential(
        tenant,
        name,
        prefix,
        enabled,
        created_at,
        rate,
        rotated_at,
        previous_prefix if live else None,
        until if live else None,
    )


def credentials(*, tenants: list[str], now: datetime) -> list[Credential]:
    # Never a secret column: they are not even decrypted for this page.
    rows = (
        IngressSecret.objects.filter(tenant__in=tenants)
        .order_by("tenant", "name")
        .values_list(
            "tenant",
            "name",
            "token_prefix",
            "enabled",
            "created_at",
            "rate_limit_per_minute",
            "rotated_at",
            "previous_token_prefix",
            "previous_valid_until",
        )
    )
    return [_credential(row, now) for row in rows]


def credential_get(*, tenant: str, name: str, tenants: list[str], now: datetime) -> Credential | None:
    if tenant not in tenants:
        return None
    return next((c for c in credentials(tenants=[tenant], now=now) if c.name == name), None)
