"""The audit log's writes: one AuditEntry per operator action, from the dashboard, the API or the
command line, written in the same transaction as the action so a refused or rolled-back action
leaves no entry and a done one always has exactly one.

Why here and not in the engine: the engine's services know an actor's name, not the user, their
tenants' roles or where the request came from (IP, user agent, "cli"); all three interfaces live
in this package. The engine keeps writing its per-instance History rows of kind "operator".
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from dashboard.models import AuditEntry, AuditSource, AuditTenant

R = TypeVar("R")


@dataclass(frozen=True)
class Origin:
    """Where an action came from."""

    source: str
    ip: str | None = None
    user_agent: str = ""

    @classmethod
    def of_request(cls, request: HttpRequest, *, source: str = AuditSource.WEB) -> Origin:
        # REMOTE_ADDR, not X-Forwarded-For: a header the client sets proves nothing.
        raw = request.META.get("REMOTE_ADDR") or ""
        try:
            ip: str | None = str(ipaddress.ip_address(raw))
        except ValueError:
            ip = None
        agent = str(request.META.get("HTTP_USER_AGENT", "")).replace("\x00", "")[:300]
        return cls(source=source, ip=ip, user_agent=agent)

    @classmethod
    def cli(cls) -> Origin:
        return cls(source=AuditSource.CLI, user_agent="cli")


@dataclass(frozen=True)
class Audit:
    """What an action is, for its audit entry: its name, the tenants and the selection it acts on."""

    action: str
    tenants: Iterable[str]
    selection: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


def affected_count(result: object) -> int:
    """How many objects a service's result stands for: a count as is, anything else one."""
    if isinstance(result, bool):
        return 1
    return result if isinstance(result, int) else 1


def audit_record(*, user: Any, origin: Origin, audit: Audit, affected: int) -> AuditEntry:
    tenants = sorted(set(audit.tenants))
    entry = AuditEntry.objects.create(
        created_at=timezone.now(),
        user=user if getattr(user, "pk", None) else None,
        actor=user.get_username() if user is not None else "",
        action=audit.action,
        source=origin.source,
        ip=origin.ip,
        user_agent=origin.user_agent,
        tenants=tenants,
        selection=audit.selection,
        affected=affected,
        reason=audit.reason[:2000],
    )
    AuditTenant.objects.bulk_create([AuditTenant(entry=entry, tenant=t) for t in tenants])
    return entry


def audited(
    *, user: Any, origin: Origin, audit: Audit, run: Callable[[], R], affected: Callable[[R], int] = affected_count
) -> R:
    """Run an action and write its audit entry, both or neither."""
    with transaction.atomic():
        result = run()
        audit_record(user=user, origin=origin, audit=audit, affected=affected(result))
    return result
