"""The workflows pages: every workflow type's summary, and one workflow's step DAG with its heat,
its versions and a form to start a run by hand."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard import access, actions
from dashboard import selectors as sel
from dashboard.actions import ActionRefused
from dashboard.api.errors import engine_error_status
from dashboard.audit import Audit, Origin, audited
from dashboard.forms import StartForm
from dashboard.live import ops_pages as live_pages
from dashboard.models import Role
from dashboard.query_params import QueryReader
from dashboard.submissions import once
from dashboard.versions import retire_refusal
from dashboard.views.common import HtmxHttpRequest, page, tenants
from ingest.engine import EngineError, UnknownWorkflow, workflow_names, workflow_versions
from ingest.engine.services.versions import workflow_version_retire

WINDOWS = ("1h", "24h", "7d")


def _window(request: HttpRequest) -> str:
    reader = QueryReader(request.GET)
    window = reader.choice("window", WINDOWS, "24h")
    reader.done()
    return window


@require_GET
@access.require_role()
def workflows(request: HtmxHttpRequest) -> HttpResponse:
    window, now = _window(request), timezone.now()
    rows = sel.workflow_summaries(tenants=tenants(request), since=sel.window_start(window, now=now))
    pulls = sel.source_pull_rows(tenants=tenants(request), now=now)
    return page(
        request,
        "ops/workflows.html",
        {"rows": rows, "window": window, "windows": WINDOWS, "pulls": pulls},
        fragment="results",
    )


@require_GET
@access.require_role()
def workflow_dag(request: HtmxHttpRequest, name: str) -> HttpResponse:
    context = live_pages.workflow_dag_context(request.user, request.GET, name=name)
    if context is None:
        raise Http404("no runs of this workflow in your tenants")
    return page(
        request,
        "ops/workflow_dag.html",
        {**context, **_versions_context(request, name), **_start_context(request, name)},
        fragment="dag",
    )


class RetireForm(forms.Form):
    reason = forms.CharField(max_length=2000, required=False, help_text="Recorded in the audit log with your name.")


def _versions_context(
    request: HttpRequest,
    name: str,
    *,
    form: RetireForm | None = None,
    error: str = "",
    failed_version: int | None = None,
) -> dict[str, Any]:
    try:
        versions = workflow_versions(workflow=name, tenants=tenants(request))
    except UnknownWorkflow:
        versions = []  # runs of a workflow no code registers any more: nothing to retire
    return {
        "versions": versions,
        "can_retire": bool(access.acting_tenants(request.user)),
        "retire_form": form or RetireForm(),
        "retire_error": error,
        "failed_version": failed_version,
    }


@require_POST
@access.require_role(Role.OPERATOR)
@once()
def workflow_version_retire_view(request: HtmxHttpRequest, name: str, version: int) -> HttpResponse:
    """Retire an old version; a refusal is shown in place on the workflow page (403/409)."""
    if not 1 <= version <= 2**31 - 1:
        raise Http404("no such version")
    context = live_pages.workflow_dag_context(request.user, request.GET, name=name)
    if context is None:
        raise Http404("no runs of this workflow in your tenants")
    form = RetireForm(request.POST)
    status, error = 400, ""
    if form.is_valid():
        error = retire_refusal(request.user, workflow=name, version=version) or ""
        status = 403
        if not error:
            reason = form.cleaned_data["reason"]
            try:
                audited(
                    user=request.user,
                    origin=Origin.of_request(request),
                    audit=Audit(
                        "workflow.version_retire",
                        access.acting_tenants(request.user),
                        {"workflow": name, "version": version},
                        reason,
                    ),
                    run=lambda: workflow_version_retire(
                        workflow=name, version=version, actor=request.user.get_username(), reason=reason
                    ),
                )
            except (EngineError, ValueError) as exc:
                error, status = str(exc), 409
            else:
                messages.success(request, f"Version {version} of {name} is retired.")
                return HttpResponseRedirect(reverse("ops:workflow", args=[name]) + "#versions", status=303)
    context.update(_versions_context(request, name, form=form, error=error, failed_version=version))
    context.update(_start_context(request, name))
    return page(request, "ops/workflow_dag.html", context, status=status)


def _start_context(
    request: HttpRequest, name: str, *, form: StartForm | None = None, error: str = ""
) -> dict[str, Any]:
    acting = access.acting_tenants(request.user)
    if form is None:
        form = StartForm(tenants=acting, initial={"tenant": acting[0] if acting else ""})
    return {"can_start": bool(acting) and name in workflow_names(), "start_form": form, "start_error": error}


@require_POST
@access.require_role(Role.OPERATOR)
@once()
def workflow_start(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """Start a run by hand through the action service (audited); every invalid field is shown
    in place at once (400), a refusal of the engine in place too (404/409/422)."""
    context = live_pages.workflow_dag_context(request.user, request.GET, name=name)
    if context is None:
        raise Http404("no runs of this workflow in your tenants")
    form = StartForm(request.POST, tenants=access.acting_tenants(request.user))
    status, error = 400, ""
    if form.is_valid():
        d = form.cleaned_data
        try:
            done = actions.instance_start(
                user=request.user,
                origin=Origin.of_request(request),
                workflow=name,
                params=d["params"],
                tenant=d["tenant"],
                id=d["id"] or None,
                priority=d["priority"],
                start_at=d["start_at"],
                search_attributes=d["search_attributes"],
            )
        except ActionRefused as exc:
            error, status = exc.message, exc.status
        except EngineError as exc:
            error, status = str(exc), engine_error_status(exc)
        else:
            messages.success(request, f"Run {done.instance_id} of {name} started in tenant {d['tenant']}.")
            return HttpResponseRedirect(reverse("instance-detail", args=[done.instance_id]), status=303)
    context.update(_versions_context(request, name))
    context.update(_start_context(request, name, form=form, error=error))
    return page(request, "ops/workflow_dag.html", context, status=status)
