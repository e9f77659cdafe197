"""Writes for rules and channels, validated here so the dashboard and the API refuse the same
things with the same messages. Keyword-only, `<entity>_<verb>`."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from ingest.alerts.conditions import params_clean
from ingest.alerts.errors import (
    ChannelNotFound,
    InvalidChannel,
    InvalidRule,
    NameTaken,
    RuleNotFound,
)
from ingest.alerts.models import Channel, ChannelKind, IngressError, Rule
from ingest.sources.notify import URL_PATTERN as URL_PATTERN  # the rule the API's schema states
from ingest.sources.notify import address_problem, url_problem
from ingest.triggers.models import Route

MAX_RECIPIENTS = 50
MIN_HMAC_KEY = 16
SMTP_PORTS = (1, 65535)


def _name_checked(name: str, what: type[Exception]) -> str:
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise what(f"the name must be 1 to 100 characters besides spaces; got {len(name)}")
    return name


def _port_checked(port: Any) -> int | None:
    """An SMTP port as a number: 25, "25" (a form) or 25.0 (JSON's integer written as a float)."""
    if port in (None, ""):
        return None
    if isinstance(port, float) and port.is_integer():
        port = int(port)
    if isinstance(port, str) and port.strip().isdigit():
        port = int(port.strip())
    low, high = SMTP_PORTS
    if isinstance(port, bool) or not isinstance(port, int) or not low <= port <= high:
        raise InvalidChannel(f"smtp port {port!r} is not a port number ({low} to {high})")
    return port


def channel_clean(
    *, kind: str, config: dict[str, Any], secrets: dict[str, Any], before: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config, secrets) for a channel of `kind`; a secret left blank keeps its value `before`."""
    merged = {**(before or {}), **{k: v for k, v in secrets.items() if v not in ("", None)}}
    if kind == ChannelKind.EMAIL:
        to = config.get("to") or []
        if isinstance(to, str):
            to = [a.strip() for a in to.replace(";", ",").split(",") if a.strip()]
        if not to or len(to) > MAX_RECIPIENTS:
            raise InvalidChannel(f"an email channel needs 1 to {MAX_RECIPIENTS} recipients in 'to'")
        for address in to:
            if problem := address_problem(address):
                raise InvalidChannel(problem)
        smtp = config.get("smtp") or {}
        if smtp and (not isinstance(smtp, dict) or not str(smtp.get("host", "")).strip()):
            raise InvalidChannel("smtp, when given, needs a host (and optionally port, username, use_tls)")
        if smtp:
            port = _port_checked(smtp.get("port"))
            smtp = {k: v for k, v in smtp.items() if k != "port"} | ({"port": port} if port is not None else {})
        clean = {"to": to, "smtp": smtp} if smtp else {"to": to}
        return clean, {k: v for k, v in merged.items() if k == "smtp_password"}
    if kind not in (ChannelKind.SLACK, ChannelKind.WEBHOOK):
        raise InvalidChannel(f"kind {kind!r} is unknown; use email, slack or webhook")
    url = str(merged.get("url") or "")
    if problem := url_problem(url) if url else "a webhook channel needs its URL":
        raise InvalidChannel(problem)
    kept = {"url": url.strip()}
    if kind == ChannelKind.WEBHOOK:
        key = str(merged.get("hmac_key") or "")
        if len(key) < MIN_HMAC_KEY:
            raise InvalidChannel(f"a signed webhook needs an HMAC key of at least {MIN_HMAC_KEY} characters")
        kept["hmac_key"] = key
    return {}, kept


def channel_save(
    *,
    tenant: str,
    name: str,
    kind: str,
    config: dict[str, Any] | None = None,
    secrets: dict[str, Any] | None = None,
    enabled: bool = True,
    channel_id: int | None = None,
    now: datetime,
) -> Channel:
    """Create a channel, or update `channel_id` of the same tenant (its kind stays)."""
    name = _name_checked(name, InvalidChannel)
    with transaction.atomic():
        channel = None
        if channel_id is not None:
            channel = Channel.objects.select_for_update().filter(id=channel_id, tenant=tenant).first()
            if channel is None:
                raise ChannelNotFound(f"no channel {channel_id} in tenant {tenant!r}")
            kind = channel.kind
        clean_config, clean_secrets = channel_clean(
            kind=kind, config=config or {}, secrets=secrets or {}, before=channel.secret_values() if channel else None
        )
        if channel is None:
            channel = Channel(tenant=tenant, kind=kind, created_at=now)
        channel.name, channel.config, channel.enabled, channel.updated_at = name, clean_config, enabled, now
        channel.secrets = json.dumps(clean_secrets)
        try:
            with transaction.atomic():
                channel.save()
        except IntegrityError:
            raise NameTaken(f"tenant {tenant!r} already has a channel named {name!r}; pick another name") from None
    return channel


def rule_save(
    *,
    tenant: str,
    name: str,
    condition: str,
    params: dict[str, Any] | None = None,
    channel_ids: Iterable[int],
    throttle_seconds: int = 600,
    notify_resolved: bool = True,
    enabled: bool = True,
    rule_id: int | None = None,
    actor: str = "",
    now: datetime,
) -> Rule:
    """Create a rule, or update `rule_id` of the same tenant; its channels must be the tenant's."""
    name = _name_checked(name, InvalidRule)
    clean = params_clean(condition, params)
    if not 0 <= throttle_seconds <= 7 * 86400:
        raise InvalidRule(f"throttle_seconds must be between 0 and 604800 (a week); got {throttle_seconds}")
    ids = sorted(set(channel_ids))
    channels = list(Channel.objects.filter(id__in=ids, tenant=tenant))
    if not ids or len(channels) != len(ids):
        missing = sorted(set(ids) - {c.id for c in channels})
        if not ids:
            raise InvalidRule("a rule needs at least one channel of its tenant")
        raise ChannelNotFound(f"channels {missing} are not channels of tenant {tenant!r}")
    with transaction.atomic():
        if rule_id is None:
            rule = Rule(tenant=tenant, created_by=actor, created_at=now)
        else:
            found = Rule.objects.select_for_update().filter(id=rule_id, tenant=tenant).first()
            if found is None:
                raise RuleNotFound(f"no rule {rule_id} in tenant {tenant!r}")
            rule = found
        rule.name, rule.condition, rule.params, rule.updated_at = name, condition, clean, now
        rule.throttle_seconds, rule.notify_resolved, rule.enabled = throttle_seconds, notify_resolved, enabled
        try:
            with transaction.atomic():
                rule.save()
        except IntegrityError:
            raise NameTaken(f"tenant {tenant!r} already has a rule named {name!r}; pick another name") from None
        rule.channels.set(channels)
    return rule


def rule_set_enabled(*, rule_id: int, tenant: str, enabled: bool, now: datetime) -> Rule:
    updated = Rule.objects.filter(id=rule_id, tenant=tenant).update(enabled=enabled, updated_at=now)
    if not updated:
        raise RuleNotFound(f"no rule {rule_id} in tenant {tenant!r}")
    return Rule.objects.get(id=rule_id)


def channel_set_enabled(*, channel_id: int, tenant: str, enabled: bool, now: datetime) -> Channel:
    updated = Channel.objects.filter(id=channel_id, tenant=tenant).update(enabled=enabled, updated_at=now)
    if not updated:
        raise ChannelNotFound(f"no channel {channel_id} in tenant {tenant!r}")
    return Channel.objects.get(id=channel_id)


def ingress_error_record(*, route: str, status: int, now: datetime) -> None:
    """A 5xx answered by signed ingress (the route's tenant, when the route exists)."""
    tenant = Route.objects.filter(name=route).values_list("tenant", flat=True).first() or ""
    IngressError.objects.create(route=route[:100], tenant=tenant, status=status, created_at=now)
