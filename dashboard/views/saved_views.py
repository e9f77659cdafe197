"""Saved views of the instances list: save the filters being looked at under a name, list them,
open, rename and delete them. Each user's own (dashboard.saved_views): another user's view is a
404. Every write submits once (dashboard.submissions), refuses a view changed since the page
showed it (409), and is audited."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard import access
from dashboard.audit import Audit, Origin, audited
from dashboard.saved_views import (
    SavedViewDeleteForm,
    SavedViewError,
    SavedViewForm,
    SavedViewNameTaken,
    SavedViewNotFound,
    SavedViewRenameForm,
    saved_view_create,
    saved_view_delete,
    saved_view_get,
    saved_view_list,
    saved_view_rename,
)
from dashboard.submissions import once
from dashboard.views.common import HtmxHttpRequest, page, tenants


def _page(
    request: HtmxHttpRequest,
    *,
    form: SavedViewForm | None = None,
    rename: tuple[int, Any] | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {"rows": saved_view_list(user=request.user), "form": form, "rename": rename}
    return page(request, "runs/saved_views.html", context, status=status)


@require_GET
@access.require_role()
def saved_views(request: HtmxHttpRequest) -> HttpResponse:
    return _page(request)


@require_POST
@access.require_role()
@once()
def saved_view_save(request: HtmxHttpRequest) -> HttpResponse:
    form = SavedViewForm(request.POST)
    if not form.is_valid():
        return _page(request, form=form, status=400)
    name, query = form.cleaned_data["name"], form.cleaned_data["query"]
    try:
        row = audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit("saved_view.create", tenants(request), {"name": name, "query": query}),
            run=lambda: saved_view_create(user=request.user, name=name, query=query, now=timezone.now()),
        )
    except SavedViewError as exc:
        form.add_error("name" if isinstance(exc, SavedViewNameTaken) else None, str(exc))
        return _page(request, form=form, status=exc.status)
    messages.success(request, f"Saved view {row.name!r}: find it under Saved views.")
    return redirect(f"{reverse('instance-list')}?{row.query}")


def _refused(request: HtmxHttpRequest, exc: SavedViewError, view_id: int, form: Any = None) -> HttpResponse:
    if isinstance(exc, SavedViewNotFound):
        raise Http404(str(exc))
    if form is not None:
        form.add_error(None, str(exc))
        return _page(request, rename=(view_id, form), status=exc.status)
    messages.error(request, str(exc))
    return _page(request, status=exc.status)


@require_POST
@access.require_role()
@once()
def saved_view_rename_run(request: HtmxHttpRequest, view_id: int) -> HttpResponse:
    try:
        saved_view_get(user=request.user, view_id=view_id)
    except SavedViewNotFound as exc:
        raise Http404(str(exc)) from None
    form = SavedViewRenameForm(request.POST)
    if not form.is_valid():
        return _page(request, rename=(view_id, form), status=400)
    name, version = form.cleaned_data["name"], form.cleaned_data["version"]
    try:
        old, row = audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit("saved_view.rename", tenants(request), {"id": view_id, "name": name}),
            run=lambda: saved_view_rename(
                user=request.user, view_id=view_id, name=name, version=version, now=timezone.now()
            ),
        )
    except SavedViewError as exc:
        return _refused(request, exc, view_id, form)
    messages.success(request, f"Saved view {old!r} renamed to {row.name!r}.")
    return redirect("saved-views")


@require_POST
@access.require_role()
@once()
def saved_view_delete_run(request: HtmxHttpRequest, view_id: int) -> HttpResponse:
    form = SavedViewDeleteForm(request.POST)
    version = form.cleaned_data["version"] if form.is_valid() else ""
    if not version:
        try:
            saved_view_get(user=request.user, view_id=view_id)
        except SavedViewNotFound as exc:
            raise Http404(str(exc)) from None
        messages.error(request, "the delete form carried no version of the view; load the page again")
        return _page(request, status=400)
    try:
        row = audited(
            user=request.user,
            origin=Origin.of_request(request),
            audit=Audit("saved_view.delete", tenants(request), {"id": view_id}),
            run=lambda: saved_view_delete(user=request.user, view_id=view_id, version=version),
        )
    except SavedViewError as exc:
        return _refused(request, exc, view_id)
    messages.success(request, f"Saved view {row.name!r} deleted.")
    return redirect("saved-views")
