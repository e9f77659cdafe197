"""The tenants' source connections as the console and the API show them: settings in clear, each
secret only as whether it is set and its masked end (`ingest.engine.mask`), the last test's outcome,
and, for Gong and Salesforce, how far the scheduled pull has reached."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ingest.engine import mask
from ingest.pipelines.connections import (
    KIND_FIELDS,
    OPTION_FIELDS,
    SECRET_FIELDS,
    connection_version,
)
from ingest.pipelines.models import Connection, ConnectionKind
from ingest.pipelines.selectors import PULL_OPTION, PULLED_KINDS


@dataclass(frozen=True)
class SecretState:
    """What may be shown of a stored secret: whether it is set, and its masked end."""

    name: str
    set: bool
    ends: str


@dataclass(frozen=True)
class PullState:
    cursor: datetime | None
    lag_seconds: float | None
    last_pull_at: datetime | None
    last_error: str
    pulled: bool


@dataclass(frozen=True)
class ConnectionRow:
    tenant: str
    kind: str
    kind_label: str
    enabled: bool
    base_url: str
    provider: str
    model: str
    service: str
    organization_id: str
    options: dict[str, Any]
    secrets: list[SecretState]
    version: str
    updated_at: datetime
    last_tested_at: datetime | None
    last_test_ok: bool | None
    last_test_message: str
    pull: PullState | None


def _row(c: Connection, now: datetime) -> ConnectionRow:
    options = dict(c.options or {})
    secrets = [
        SecretState(name, bool(getattr(c, name)), mask(str(getattr(c, name) or "")))
        for name in SECRET_FIELDS
        if name in KIND_FIELDS.get(c.kind, ())
    ]
    pull = None
    if c.kind in PULLED_KINDS:
        cur = getattr(c, "pull_cursor", None)
        cursor = cur.cursor if cur else None
        pull = PullState(
            cursor=cursor,
            lag_seconds=None if cursor is None else max(0.0, (now - cursor).total_seconds()),
            last_pull_at=cur.last_pull_at if cur else None,
            last_error=cur.last_error if cur else "",
            pulled=options.get(PULL_OPTION) is not False,
        )
    return ConnectionRow(
        tenant=c.tenant,
        kind=c.kind,
        kind_label=ConnectionKind(c.kind).label if c.kind in ConnectionKind.values else c.kind,
        enabled=c.enabled,
        base_url=c.base_url,
        **{name: str(options.get(name, "")) for name in OPTION_FIELDS},
        options={k: v for k, v in options.items() if k not in OPTION_FIELDS},
        secrets=secrets,
        version=connection_version(c),
        updated_at=c.updated_at,
        last_tested_at=c.last_tested_at,
        last_test_ok=c.last_test_ok,
        last_test_message=c.last_test_message,
        pull=pull,
    )


def connection_rows(*, tenants: Collection[str], now: datetime) -> list[ConnectionRow]:
    """Every connection of `tenants`, by tenant and kind."""
    rows = (
        Connection.objects.filter(tenant__in=list(tenants))
        .select_related("pull_cursor")
        .order_by("tenant", "kind")
        .defer("access_token")
    )
    return [_row(c, now) for c in rows]


def connection_get(*, tenant: str, kind: str, tenants: Collection[str], now: datetime) -> ConnectionRow | None:
    """The connection of `tenant` and `kind` when `tenant` is one of `tenants`, else None."""
    if tenant not in tenants:
        return None
    c = Connection.objects.filter(tenant=tenant, kind=kind).select_related("pull_cursor").first()
    return None if c is None else _row(c, now)
