"""/api/alerts (rules, channels, notifications, the channel test) and /api/callbacks (an
instance's or a route's callback URL). Thin over ingest.alerts' services and selectors; every
write is scoped to a tenant the token's user operates, every read to the tenants it sees."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Router, Status
from pydantic import ConfigDict, StrictBool

from dashboard import access
from dashboard.api.alert_schemas import channel_variants, rule_variants
from dashboard.api.auth import require_act
from dashboard.api.errors import ApiProblem
from dashboard.api.openapi import NONBLANK_PATTERN
from dashboard.api.schemas import ERRORS, URL_PATTERN, InputSchema, Whole
from ingest.alerts import callbacks, selectors, services
from ingest.alerts.firing import channel_test
from ingest.alerts.models import Channel, ChannelKind, Condition, Rule
from ingest.engine.models import Instance
from ingest.triggers.models import Route

router = Router(tags=["alerts"])


class RuleIn(InputSchema):
    model_config = ConfigDict(json_schema_extra=rule_variants())
    tenant: str = Field("default", min_length=1, max_length=100)
    name: str = Field(..., min_length=1, max_length=100, json_schema_extra={"pattern": NONBLANK_PATTERN})
    condition: Condition
    params: dict[str, Any] = Field(default_factory=dict)
    channel_ids: list[Annotated[int, Field(ge=1, le=2**63 - 1)]] = Field(..., min_length=1, max_length=100)
    throttle_seconds: Whole = Field(600, ge=0, le=604800)
    notify_resolved: StrictBool = True
    enabled: StrictBool = True


class ChannelIn(InputSchema):
    """A channel; on an update, `kind` must be the channel's own (a kind never changes)."""

    model_config = ConfigDict(json_schema_extra=channel_variants())
    tenant: str = Field("default", min_length=1, max_length=100)
    name: str = Field(..., min_length=1, max_length=100, json_schema_extra={"pattern": NONBLANK_PATTERN})
    kind: ChannelKind
    config: dict[str, Any] = Field(default_factory=dict)
    secrets: dict[str, str] = Field(default_factory=dict, description="url, hmac_key, smtp_password; write-only")
    enabled: StrictBool = True


class CallbackIn(InputSchema):
    # Declared, not enforced here: the service's refusal names what is wrong with the URL.
    url: str = Field(..., min_length=1, max_length=2000, json_schema_extra={"pattern": URL_PATTERN})


def _rule(request: HttpRequest, rule_id: int) -> Rule:
    rule = Rule.objects.filter(id=rule_id, tenant__in=access.tenants_for(request.user)).first()
    if rule is None:
        raise ApiProblem(404, "rule_not_found", f"no alert rule {rule_id} is visible to this token")
    return rule


def _channel(request: HttpRequest, channel_id: int) -> Channel:
    channel = Channel.objects.filter(id=channel_id, tenant__in=access.tenants_for(request.user)).first()
    if channel is None:
        raise ApiProblem(404, "channel_not_found", f"no channel {channel_id} is visible to this token")
    return channel


@router.get("/alerts/rules", response={200: list[dict[str, Any]], **ERRORS})
def rule_list(request: HttpRequest) -> list[dict[str, Any]]:
    return selectors.rule_rows(tenants=access.tenants_for(request.user))


@router.post("/alerts/rules", response={201: dict[str, Any], **ERRORS})
def rule_create(request: HttpRequest, body: RuleIn) -> Status[dict[str, Any]]:
    require_act(request.user, body.tenant)
    rule = services.rule_save(**body.dict(), actor=request.user.username, now=timezone.now())
    return Status(201, selectors.rule_row(rule))


@router.put("/alerts/rules/{rule_id}", response={200: dict[str, Any], **ERRORS})
def rule_update(request: HttpRequest, rule_id: int, body: RuleIn) -> dict[str, Any]:
    rule = _rule(request, rule_id)
    require_act(request.user, rule.tenant)
    if body.tenant != rule.tenant:
        # The body is valid; the rule's state (its tenant) is what refuses it: a conflict.
        raise ApiProblem(
            409,
            "rule_tenant_fixed",
            f"rule {rule.id} belongs to tenant {rule.tenant!r} and stays there; create a new rule in the other tenant",
        )
    saved = services.rule_save(**body.dict(), rule_id=rule.id, actor=request.user.username, now=timezone.now())
    return selectors.rule_row(saved)


@router.post("/alerts/rules/{rule_id}/{action}", response={200: dict[str, Any], **ERRORS})
def rule_toggle(request: HttpRequest, rule_id: int, action: str) -> dict[str, Any]:
    if action not in ("enable", "disable"):
        raise ApiProblem(404, "not_found", f"no action {action!r}; use enable or disable")
    rule = _rule(request, rule_id)
    require_act(request.user, rule.tenant)
    saved = services.rule_set_enabled(
        rule_id=rule.id, tenant=rule.tenant, enabled=action == "enable", now=timezone.now()
    )
    return selectors.rule_row(saved)


@router.get("/alerts/channels", response={200: list[dict[str, Any]], **ERRORS})
def channel_list(request: HttpRequest) -> list[dict[str, Any]]:
    return selectors.channel_rows(tenants=access.tenants_for(request.user))


@router.post("/alerts/channels", response={201: dict[str, Any], **ERRORS})
def channel_create(request: HttpRequest, body: ChannelIn) -> Status[dict[str, Any]]:
    require_act(request.user, body.tenant)
    channel = services.channel_save(**body.dict(), now=timezone.now())
    return Status(201, selectors.channel_row(channel))


@router.put("/alerts/channels/{channel_id}", response={200: dict[str, Any], **ERRORS})
def channel_update(request: HttpRequest, channel_id: int, body: ChannelIn) -> dict[str, Any]:
    channel = _channel(request, channel_id)
    require_act(request.user, channel.tenant)
    if body.kind != channel.kind:
        raise ApiProblem(
            409,
            "kind_fixed",
            f"channel {channel.id} is a {channel.kind} channel and stays one; create a new channel of the other kind",
        )
    fields = body.dict(exclude={"tenant", "kind"})
    saved = services.channel_save(
        **fields, tenant=channel.tenant, kind=channel.kind, channel_id=channel.id, now=timezone.now()
    )
    return selectors.channel_row(saved)


@router.post("/alerts/channels/{channel_id}/test", response={202: dict[str, Any], **ERRORS})
def channel_send_test(request: HttpRequest, channel_id: int) -> Status[dict[str, Any]]:
    channel = _channel(request, channel_id)
    require_act(request.user, channel.tenant)
    note = channel_test(channel=channel, now=timezone.now())
    return Status(202, selectors.notification_row(note))


@router.get("/alerts/notifications", response={200: list[dict[str, Any]], **ERRORS})
def notification_list(request: HttpRequest, limit: int = 100) -> list[dict[str, Any]]:
    return selectors.notification_rows(tenants=access.tenants_for(request.user), limit=min(max(limit, 1), 500))


def _instance_tenant(request: HttpRequest, instance_id: str) -> str:
    tenant = (
        Instance.objects.filter(id=instance_id, tenant__in=access.tenants_for(request.user))
        .values_list("tenant", flat=True)
        .first()
    )
    if tenant is None:
        raise ApiProblem(404, "instance_not_found", f"no instance {instance_id[:100]!r} is visible to this token")
    return tenant


@router.get("/callbacks/instances/{instance_id}", response={200: dict[str, Any], **ERRORS})
def instance_callback_get(request: HttpRequest, instance_id: str) -> dict[str, Any]:
    _instance_tenant(request, instance_id)
    found = selectors.callback_for(instance_id=instance_id)
    if found is None:
        raise ApiProblem(404, "callback_not_found", f"instance {instance_id[:100]!r} carries no callback")
    return found


@router.put("/callbacks/instances/{instance_id}", response={200: dict[str, Any], **ERRORS})
def instance_callback_set(request: HttpRequest, instance_id: str, body: CallbackIn) -> dict[str, Any]:
    tenant = _instance_tenant(request, instance_id)
    require_act(request.user, tenant)
    found = callbacks.callback_register(
        instance_id=instance_id, tenant=tenant, url=body.url, source="instance", now=timezone.now()
    )
    return selectors.callback_row(found)


@router.put("/callbacks/routes/{route}", response={200: dict[str, Any], **ERRORS})
def route_callback_set(request: HttpRequest, route: str, body: CallbackIn) -> dict[str, Any]:
    tenant = (
        Route.objects.filter(name=route, tenant__in=access.tenants_for(request.user))
        .values_list("tenant", flat=True)
        .first()
    )
    if tenant is None:
        raise ApiProblem(404, "route_not_found", f"no route {route[:100]!r} is visible to this token")
    require_act(request.user, tenant)
    callbacks.route_callback_set(route=route, url=body.url, now=timezone.now())
    return {"route": route, "url": body.url.strip()}
