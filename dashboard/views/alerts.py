"""The Alerts pages: rules, channels, recent alerts and deliveries on one page; the forms that
create and edit a rule or a channel, enable or disable it, send a channel's test; and the
notifications page (what was sent, to whom, delivered or not).

Tenant-scoped as every ops page: other tenants' rules and channels are 404; acting needs the
operator role in the object's tenant, checked here, whatever the template shows."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard import access
from dashboard.alert_forms import ChannelForm, RuleForm, channel_initial
from dashboard.query_params import QueryReader
from dashboard.submissions import once
from dashboard.views.common import HtmxHttpRequest, page, require_act, tenants
from ingest.alerts import selectors as alert_sel
from ingest.alerts import services
from ingest.alerts.errors import AlertError
from ingest.alerts.firing import channel_test
from ingest.alerts.models import Channel, DeliveryState, Rule


def _context(request: HtmxHttpRequest) -> dict[str, Any]:
    visible = tenants(request)
    return {
        "rules": alert_sel.rule_rows(tenants=visible),
        "channels": alert_sel.channel_rows(tenants=visible),
        "alerts": alert_sel.alert_rows(tenants=visible, limit=20),
        "notifications": alert_sel.notification_rows(tenants=visible, limit=20),
        "acting": set(access.acting_tenants(request.user)),
    }


@require_GET
@access.require_role()
def alerts(request: HtmxHttpRequest) -> HttpResponse:
    return page(request, "ops/alerts.html", _context(request), fragment="deliveries")


@require_GET
@access.require_role()
def notifications(request: HtmxHttpRequest) -> HttpResponse:
    reader = QueryReader(request.GET)
    state = reader.choice("state", DeliveryState.values)
    reader.done()
    rows = alert_sel.notification_rows(tenants=tenants(request), limit=500)
    if state:
        rows = [r for r in rows if r["state"] == state]
    return page(request, "ops/notifications.html", {"notifications": rows, "state": state}, fragment="table")


def _rule(request: HtmxHttpRequest, rule_id: int) -> Rule:
    rule = alert_sel.rule_get(tenants=tenants(request), rule_id=rule_id)
    if rule is None:
        raise Http404(f"no alert rule {rule_id}")
    return rule


def _channel(request: HtmxHttpRequest, channel_id: int) -> Channel:
    channel = alert_sel.channel_get(tenants=tenants(request), channel_id=channel_id)
    if channel is None:
        raise Http404(f"no channel {channel_id}")
    return channel


def _rule_form(request: HtmxHttpRequest, *args: Any, **kwargs: Any) -> RuleForm:
    acting = access.acting_tenants(request.user)
    return RuleForm(*args, tenants=acting, channels=alert_sel.channels_of(tenants=acting), **kwargs)


@require_GET
@access.require_role("operator")
def rule_form(request: HtmxHttpRequest, rule_id: int | None = None) -> HttpResponse:
    initial: dict[str, Any] = {"params": "{}", "throttle_seconds": 600, "notify_resolved": True, "enabled": True}
    if rule_id is not None:
        rule = _rule(request, rule_id)
        require_act(request, rule.tenant)
        row = alert_sel.rule_row(rule)
        initial = {**row, "params": json.dumps(row["params"]), "channels": [str(i) for i in row["channel_ids"]]}
    return render(
        request, "ops/alert_rule_form.html", {"form": _rule_form(request, initial=initial), "rule_id": rule_id}
    )


@require_POST
@access.require_role("operator")
@once()
def rule_save(request: HtmxHttpRequest, rule_id: int | None = None) -> HttpResponse:
    form = _rule_form(request, request.POST)
    if rule_id is not None:
        require_act(request, _rule(request, rule_id).tenant)
    if form.is_valid():
        try:
            services.rule_save(
                **form.service_arguments(), rule_id=rule_id, actor=request.user.username, now=timezone.now()
            )
        except AlertError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Rule {form.cleaned_data['name']!r} saved.")
            return redirect("ops:alerts")
    return render(request, "ops/alert_rule_form.html", {"form": form, "rule_id": rule_id}, status=400)


@require_POST
@access.require_role("operator")
@once()
def rule_toggle(request: HtmxHttpRequest, rule_id: int) -> HttpResponse:
    rule = _rule(request, rule_id)
    require_act(request, rule.tenant)
    services.rule_set_enabled(rule_id=rule.id, tenant=rule.tenant, enabled=not rule.enabled, now=timezone.now())
    messages.success(request, f"Rule {rule.name!r} {'disabled' if rule.enabled else 'enabled'}.")
    return redirect("ops:alerts")


@require_GET
@access.require_role("operator")
def channel_form(request: HtmxHttpRequest, channel_id: int | None = None) -> HttpResponse:
    initial: dict[str, Any] = {"enabled": True}
    if channel_id is not None:
        channel = _channel(request, channel_id)
        require_act(request, channel.tenant)
        initial = channel_initial(channel)
    form = ChannelForm(initial=initial, tenants=access.acting_tenants(request.user))
    return render(request, "ops/alert_channel_form.html", {"form": form, "channel_id": channel_id})


@require_POST
@access.require_role("operator")
@once()
def channel_save(request: HtmxHttpRequest, channel_id: int | None = None) -> HttpResponse:
    form = ChannelForm(request.POST, tenants=access.acting_tenants(request.user))
    if channel_id is not None:
        require_act(request, _channel(request, channel_id).tenant)
    if form.is_valid():
        try:
            services.channel_save(**form.service_arguments(), channel_id=channel_id, now=timezone.now())
        except AlertError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Channel {form.cleaned_data['name']!r} saved.")
            return redirect("ops:alerts")
    return render(request, "ops/alert_channel_form.html", {"form": form, "channel_id": channel_id}, status=400)


@require_POST
@access.require_role("operator")
@once()
def channel_toggle(request: HtmxHttpRequest, channel_id: int) -> HttpResponse:
    channel = _channel(request, channel_id)
    require_act(request, channel.tenant)
    services.channel_set_enabled(
        channel_id=channel.id, tenant=channel.tenant, enabled=not channel.enabled, now=timezone.now()
    )
    messages.success(request, f"Channel {channel.name!r} {'disabled' if channel.enabled else 'enabled'}.")
    return redirect("ops:alerts")


@require_POST
@access.require_role("operator")
@once()
def channel_send_test(request: HtmxHttpRequest, channel_id: int) -> HttpResponse:
    channel = _channel(request, channel_id)
    require_act(request, channel.tenant)
    note = channel_test(channel=channel, now=timezone.now())
    messages.success(request, f"Test notification queued to {note.recipient}; see its delivery below.")
    return redirect("ops:alerts")
