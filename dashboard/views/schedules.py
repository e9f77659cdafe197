"""The schedules page: every visible cron schedule with its next fires and last result, and the
operator's create, enable, disable, run now, edit and delete (every wrong field's error shown on
its field at once, no row changed)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard import access
from dashboard.audit import Audit, Origin, audited
from dashboard.models import Role
from dashboard.selectors import schedules as sel
from dashboard.submissions import once
from dashboard.trigger_forms import ScheduleCreateForm, ScheduleForm, add_refusal
from dashboard.views.common import HtmxHttpRequest, page, require_act, tenants
from ingest.triggers.errors import TriggerError
from ingest.triggers.field_checks import startable_workflows
from ingest.triggers.selectors import ScheduleRow
from ingest.triggers.services import (
    schedule_create_from,
    schedule_delete,
    schedule_run_now,
    schedule_set_enabled,
    schedule_update,
)


def _get(request: HtmxHttpRequest, name: str) -> ScheduleRow:
    row = sel.schedule_page_get(name=name, tenants=tenants(request), now=timezone.now())
    if row is None:
        raise Http404(f"no schedule {name[:100]!r} in your tenants")
    return row


@require_GET
@access.require_role()
def schedules(request: HtmxHttpRequest) -> HttpResponse:
    rows = sel.schedule_page_rows(tenants=tenants(request), now=timezone.now())
    acting = set(access.acting_tenants(request.user))
    return page(request, "triggers/schedules.html", {"rows": rows, "acting": acting})


def _detail(request: HtmxHttpRequest, row: ScheduleRow, form: ScheduleForm, *, status: int = 200) -> HttpResponse:
    context: dict[str, Any] = {
        "s": row,
        "form": form,
        "can_act": access.can_act(request.user, row.tenant),
        "last_status": sel.instance_status(instance_id=row.last_instance_id),
    }
    return page(request, "triggers/schedule_detail.html", context, status=status)


@require_GET
@access.require_role()
def schedule_detail(request: HtmxHttpRequest, name: str) -> HttpResponse:
    row = _get(request, name)
    form = ScheduleForm(
        initial={
            "cron": row.cron,
            "timezone": row.timezone,
            "params": row.params,
            "missed_fire_policy": row.missed_fire_policy,
            "catch_up_limit": row.catch_up_limit,
        }
    )
    return _detail(request, row, form)


@require_POST
@access.require_role()
@once()
def schedule_save(request: HtmxHttpRequest, name: str) -> HttpResponse:
    row = _get(request, name)
    require_act(request, row.tenant)
    form = ScheduleForm(request.POST)
    if not form.is_valid():
        return _detail(request, row, form, status=400)
    fields = form.schedule_fields()
    try:
        audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit("schedule.update", [row.tenant], {"schedule": name, **fields}),
            run=lambda: schedule_update(name=name, now=timezone.now(), **fields),
        )
    except TriggerError as exc:
        add_refusal(form, exc)
        return _detail(request, row, form, status=400)
    messages.success(request, f"Schedule {name} saved.")
    return redirect("triggers:schedule", name=name)


def _act(request: HtmxHttpRequest, name: str, action: str) -> HttpResponse:
    row = _get(request, name)
    require_act(request, row.tenant)
    now = timezone.now()
    audit = Audit(f"schedule.{action}", [row.tenant], {"schedule": name})
    origin = Origin.of_request(request)
    if action == "run":
        instance_id = audited(
            user=request.user,
            origin=origin,
            audit=audit,
            run=lambda: schedule_run_now(name=name, now=now, actor=request.user.username),
        )
        messages.success(request, f"Schedule {name} fired now: instance {instance_id}.")
    else:
        audited(
            user=request.user,
            origin=origin,
            audit=audit,
            run=lambda: schedule_set_enabled(name=name, enabled=action == "enable", now=now),
        )
        messages.success(request, f"Schedule {name} {action}d.")
    if request.POST.get("next") == "detail":
        return redirect("triggers:schedule", name=name)
    return redirect("triggers:schedules")


@require_POST
@access.require_role()
@once()
def schedule_enable(request: HtmxHttpRequest, name: str) -> HttpResponse:
    return _act(request, name, "enable")


@require_POST
@access.require_role()
@once()
def schedule_disable(request: HtmxHttpRequest, name: str) -> HttpResponse:
    return _act(request, name, "disable")


@require_POST
@access.require_role()
@once()
def schedule_run(request: HtmxHttpRequest, name: str) -> HttpResponse:
    return _act(request, name, "run")


def _create_form(request: HtmxHttpRequest, data: Any = None) -> ScheduleCreateForm:
    acting = access.acting_tenants(request.user)
    return ScheduleCreateForm(
        data,
        workflows=startable_workflows(),
        tenants=sorted(acting),
        initial={"timezone": "UTC", "enabled": True, "catch_up_limit": 1, "missed_fire_policy": "skip", "params": {}},
    )


def _new_page(request: HtmxHttpRequest, form: ScheduleCreateForm, *, status: int = 200) -> HttpResponse:
    return page(request, "triggers/schedule_new.html", {"form": form}, status=status)


@require_GET
@access.require_role(Role.OPERATOR)
def schedule_new(request: HtmxHttpRequest) -> HttpResponse:
    return _new_page(request, _create_form(request))


@require_POST
@access.require_role(Role.OPERATOR)
@once()
def schedule_create_view(request: HtmxHttpRequest) -> HttpResponse:
    form = _create_form(request, request.POST)
    if not form.is_valid():
        return _new_page(request, form, status=400)
    f = form.cleaned_data
    require_act(request, f["tenant"])
    try:
        audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit("schedule.create", [f["tenant"]], {"schedule": f["name"], **f}),
            run=lambda: schedule_create_from(f, now=timezone.now()),
        )
    except TriggerError as exc:
        add_refusal(form, exc)
        return _new_page(request, form, status=400)
    messages.success(request, f"Schedule {f['name']} created.")
    return redirect("triggers:schedule", name=f["name"])


@require_GET
@access.require_role()
def schedule_delete_confirm(request: HtmxHttpRequest, name: str) -> HttpResponse:
    row = _get(request, name)
    require_act(request, row.tenant)
    return page(request, "triggers/schedule_delete.html", {"s": row})


@require_POST
@access.require_role()
@once()
def schedule_delete_view(request: HtmxHttpRequest, name: str) -> HttpResponse:
    row = _get(request, name)
    require_act(request, row.tenant)
    audited(
        user=request.user,
        origin=Origin.of_request(request),
        audit=Audit("schedule.delete", [row.tenant], {"schedule": name, "workflow": row.workflow, "cron": row.cron}),
        run=lambda: schedule_delete(name=name),
    )
    messages.success(request, f"Schedule {name} deleted: it fires no more. The instances it started stay.")
    return redirect("triggers:schedules")
