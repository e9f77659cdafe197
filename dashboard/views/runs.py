"""The runs pages: the instances ledger, one instance, and the operator actions on it.

Views are thin: selectors read; every action goes through `dashboard.actions` (who may act, the
arguments, the reason, the engine call and its audit entry), as the REST API and the command line
do. Other tenants' instances are 404.
"""

from __future__ import annotations

import difflib
import json
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.validators import RegexValidator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from dashboard import access, actions, saved_views, selectors, staleness
from dashboard.actions import Action, ActionRefused, StaleState, available_actions
from dashboard.audit import Origin
from dashboard.bulk import BULK_ACTIONS
from dashboard.models import Role
from dashboard.submissions import once
from dashboard.views.common import HtmxHttpRequest
from ingest.alerts.selectors import callback_for
from ingest.engine import (
    EngineError,
    public_value,
    trace_id_hex,
    tracing_continues_ingress,
    tracing_enabled,
)
from ingest.engine.models import Instance, Status
from ingest.triggers import limits
from ingest.triggers.errors import InputRejected

# ---- the ledger --------------------------------------------------------------------------


@require_GET
@access.require_role(Role.VIEWER)
def instance_list(request: HtmxHttpRequest) -> HttpResponse:
    filters = selectors.InstanceFilters.from_query(request.GET)
    after = selectors.Cursor.decode(request.GET.get("after", ""))
    before = selectors.Cursor.decode(request.GET.get("before", ""))
    number = _page_number(request.GET.get("page", ""))
    cursor = selectors.history_cursor()  # before the rows: a change made while they are read is pushed
    counted = selectors.instance_list_counted(
        user=request.user, filters=filters, after=after, before=before, page=number
    )
    page, count, count_more = counted.page, counted.count, counted.count_more
    first_page = after is None and before is None and page.page_number == 1
    base = filters.querystring()
    live: list[tuple[str, str]] = [("view", "instances"), ("after", str(cursor))]
    if first_page and page.newest is not None and filters.keyset:
        live.append(("newest", page.newest.encode()))
    elif first_page:
        live.append(("newest", "empty"))
    live.append(("rows", ",".join(r.id for r in page.rows)))
    live += filters.as_params()
    # A history restore that missed htmx's cache asks for the whole page, not the fragment.
    fragment = bool(request.htmx and not request.htmx.boosted and not request.htmx.history_restore_request)
    attr_sort = ""
    if filters.sort.lstrip("-").startswith("attr."):
        attr_sort = f"attribute {filters.sort.lstrip('-')[5:]}, {'Z→A' if filters.sort.startswith('-') else 'A→Z'}"
    context = {
        "page": page,
        "filters": filters,
        "filter_params": filters.as_params(),
        "first_page": first_page,
        "count": count,
        "count_more": count_more,
        "statuses": Status.choices,
        "sorts": list(selectors.SORT_LABELS.items()),
        "sort_label": selectors.SORT_LABELS.get(filters.sort, attr_sort),
        "attr_sort": attr_sort,
        "attributes": selectors.instance_attributes(ids=[r.id for r in page.rows]),
        "items": selectors.instance_items(ids=[r.id for r in page.rows]),
        # The menu stands outside the results an htmx request swaps: read only for the whole page.
        "saved_views": [] if fragment else saved_views.saved_view_list(user=request.user),
        "tenants": access.tenants_for(request.user),
        "ranges": list(selectors.RANGES),
        "workflows": selectors.workflow_names(user=request.user),
        "can_bulk": bool(access.acting_tenants(request.user)),
        "bulk_actions": BULK_ACTIONS,
        "next_url": f"?{_join(base, urlencode({'after': page.next_cursor.encode()}))}" if page.next_cursor else "",
        "prev_url": f"?{_join(base, urlencode({'before': page.prev_cursor.encode()}))}" if page.prev_cursor else "",
        "page_next_url": f"?{_join(base, urlencode({'page': page.page_number + 1}))}"
        if page.has_more and not filters.keyset
        else "",
        "page_prev_url": f"?{_join(base, urlencode({'page': page.page_number - 1}))}" if page.page_number > 1 else "",
        "first_url": f"?{base}" if base else "?",
        "live_query": urlencode(live),
        "now_query": base,
    }
    template = "runs/instance_list.html"
    if fragment:
        template += "#results"
    return render(request, template, context, status=400 if filters.problems else 200)


def _page_number(raw: str) -> int:
    return int(raw) if raw.isascii() and raw.isdigit() and 0 < len(raw) < 5 else 1


def _join(*parts: str) -> str:
    return "&".join(p for p in parts if p)


# ---- one instance ------------------------------------------------------------------------


def _trace_id(instance_id: str) -> str:
    """The instance's trace id: the caller's when the deployment continues ingress traces."""
    ingress = selectors.instance_ingress_traceparent(instance_id=instance_id) if tracing_continues_ingress() else None
    return trace_id_hex(instance_id, ingress)


@require_GET
@access.require_role(Role.VIEWER)
def instance_detail(request: HtmxHttpRequest, instance_id: str) -> HttpResponse:
    detail = selectors.instance_detail(user=request.user, instance_id=instance_id)
    if detail is None:
        raise Http404("no instance with that id in your tenants")
    context = {
        "d": detail,
        "i": detail.instance,
        "actions": available_actions(detail.instance) if detail.can_act else [],
        "live_query": urlencode({"view": "instance", "instance": instance_id, "after": detail.cursor}),
        "callback": callback_for(instance_id=instance_id),
        "trace": {"id": _trace_id(instance_id), "on": tracing_enabled()},
    }
    fragment = request.GET.get("fragment", "")
    template = "runs/instance_detail.html"
    if request.htmx and fragment in {"steps", "history", "dag", "waterfall", "header"}:
        template += f"#{fragment}"
    return render(request, template, context)


# ---- actions -----------------------------------------------------------------------------


def _json_field(raw: str, *, what: str) -> Any:
    try:  # within the input limits: no NUL, no 5,000-digit number, no RecursionError
        return limits.json_parse(raw, limits=limits.input_limits(), what=what) if raw.strip() else None
    except InputRejected as exc:
        raise forms.ValidationError(str(exc)) from None


class ActionForm(forms.Form):
    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Required. Recorded in the instance's history with your name.",
    )
    # The instance's version this form was shown with (dashboard.staleness): the action refuses
    # when the instance moved since.
    expected_version = forms.CharField(
        required=False, max_length=20, widget=forms.HiddenInput, validators=[RegexValidator(staleness.VERSION_PATTERN)]
    )

    def __init__(self, *args: Any, instance: Instance, **kwargs: Any) -> None:
        self.instance = instance
        super().__init__(*args, **kwargs)

    def engine_kwargs(self) -> dict[str, Any]:
        return {}


class TerminateForm(ActionForm):
    rollback = forms.BooleanField(required=False, label="Run rollback handlers (saga) of completed steps")

    def engine_kwargs(self) -> dict[str, Any]:
        return {"rollback": self.cleaned_data["rollback"]}


class RestartForm(ActionForm):
    from_step = forms.ChoiceField(required=False, label="Restart from")

    def __init__(self, *args: Any, steps: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from_step = self.fields["from_step"]
        assert isinstance(from_step, forms.ChoiceField)
        from_step.choices = [("", "the beginning (from scratch)")] + [(s, s) for s in steps]

    def engine_kwargs(self) -> dict[str, Any]:
        return {"from_step": self.cleaned_data["from_step"] or None}


class ReplayForm(ActionForm):
    params = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false"}),
        help_text="JSON object. Edit to replay with different params.",
    )
    confirm = forms.BooleanField(required=False, widget=forms.HiddenInput)

    def clean_params(self) -> Any:
        value = _json_field(self.cleaned_data["params"], what="params")
        try:  # the action service's own rule, checked here too so the diff shows only valid params
            return actions.params_check(value, original=self.instance.params)
        except (ActionRefused, InputRejected) as exc:
            raise forms.ValidationError(str(exc)) from None

    def engine_kwargs(self) -> dict[str, Any]:
        return {"params": self.cleaned_data["params"]}


class ForkForm(ReplayForm):
    from_step = forms.ChoiceField(
        label="Fork from step", help_text="Steps before it keep their results; it and every step after it run again."
    )
    params = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false"}),
        help_text="JSON object: the fork's params. Edit them or leave them as they are.",
    )
    field_order = ["from_step", "params", "reason"]

    def __init__(self, *args: Any, steps: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from_step = self.fields["from_step"]
        assert isinstance(from_step, forms.ChoiceField)
        from_step.choices = [("", "choose a step…")] + [(s, s) for s in steps]
        self.order_fields(self.field_order)

    def engine_kwargs(self) -> dict[str, Any]:
        return {"from_step": self.cleaned_data["from_step"], "params": self.cleaned_data["params"]}


class EventForm(ActionForm):
    type = forms.CharField(max_length=200, label="Event type")
    payload = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}), help_text="JSON (optional)."
    )
    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Required. Recorded in the history with your name.",
    )

    def clean_payload(self) -> Any:
        return _json_field(self.cleaned_data.get("payload", ""), what="payload")

    def engine_kwargs(self) -> dict[str, Any]:
        return {"type": self.cleaned_data["type"], "payload": self.cleaned_data["payload"]}


FORMS: dict[str, type[ActionForm]] = {
    "terminate": TerminateForm,
    "restart": RestartForm,
    "replay": ReplayForm,
    "fork": ForkForm,
    "event": EventForm,
}


def _form(action: str, instance: Instance, data: Any = None) -> ActionForm:
    cls = FORMS.get(action, ActionForm)
    kwargs: dict[str, Any] = {"instance": instance}
    if cls is RestartForm:
        kwargs["steps"] = _restartable(instance)
    if cls is ForkForm:
        kwargs["steps"] = actions.fork_points(instance_id=instance.id)
    kwargs["initial"] = {"expected_version": staleness.instance_version(instance_id=instance.id)}
    if issubclass(cls, ReplayForm) and data is None:
        kwargs["initial"]["params"] = json.dumps(public_value(instance.params), indent=2, sort_keys=True)
    return cls(data, **kwargs)


def _restartable(instance: Instance) -> list[str]:
    names = instance.steps.filter(kind="do").order_by("position").values_list("name", flat=True)
    return list(dict.fromkeys(names))


def _actionable(request: HttpRequest, instance_id: str, action: str) -> tuple[Instance, Action]:
    try:
        return actions.instance_actionable(user=request.user, instance_id=instance_id, action=action)
    except ActionRefused as exc:
        raise _refusal(exc) from None


def _refusal(exc: ActionRefused) -> Exception:
    """The service's refusal as the console answers it: its 404 and 403 pages carry the message."""
    return PermissionDenied(exc.message) if exc.status == 403 else Http404(exc.message)


def params_diff(before: Any, after: Any) -> list[tuple[str, str]]:
    """Line diff of two JSON values, as (css class, line) pairs for the replay confirmation."""
    a = json.dumps(before, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    b = json.dumps(after, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    lines: list[tuple[str, str]] = []
    for line in difflib.unified_diff(a, b, "original params", "replay params", lineterm="", n=2):
        css = (
            "hdr"
            if line.startswith(("---", "+++", "@@"))
            else "add"
            if line.startswith("+")
            else "del"
            if line.startswith("-")
            else ""
        )
        lines.append((css, line))
    return lines


def _confirm(
    request: HtmxHttpRequest,
    instance: Instance,
    spec: Action,
    form: ActionForm,
    *,
    status: int = 200,
    engine_error: str = "",
    stale: str = "",
    diff: list[tuple[str, str]] | None = None,
) -> HttpResponse:
    context = {
        "i": instance,
        "action": spec,
        "form": form,
        "engine_error": engine_error,
        "diff": diff,
        "stale": stale,
        "post_url": reverse("instance-action-run", args=[instance.id, spec.name]),
        "applies": instance.status in spec.when,
        "in_dialog": bool(request.htmx),
        "failed_for_good": selectors.instance_failed_for_good(instance) if spec.name == "retry" else None,
    }
    template = "runs/instance_action.html"
    if request.htmx:
        # The dialog posts back into itself (hx-post): an invalid form comes back here, with the
        # instance and the action in its title, instead of leaving the instance's page.
        template += "#dialog"
    return render(request, template, context, status=status)


@require_GET
@access.require_role(Role.OPERATOR)
def instance_action_confirm(request: HtmxHttpRequest, instance_id: str, action: str) -> HttpResponse:
    instance, spec = _actionable(request, instance_id, action)
    return _confirm(request, instance, spec, _form(action, instance))


@require_POST
@access.require_role(Role.OPERATOR)
@once()
def instance_action_run(request: HtmxHttpRequest, instance_id: str, action: str) -> HttpResponse:
    instance, spec = _actionable(request, instance_id, action)
    form = _form(action, instance, request.POST)
    if not form.is_valid():
        return _confirm(request, instance, spec, form, status=400)
    if type(form) is ReplayForm and not form.cleaned_data["confirm"]:
        # First submit of a replay shows what changes; the second one (confirm=1) runs it.
        diff = params_diff(public_value(instance.params), form.cleaned_data["params"])
        data = request.POST.copy()
        data["confirm"] = "True"
        data["params"] = json.dumps(form.cleaned_data["params"], indent=2, sort_keys=True)
        return _confirm(request, instance, spec, _form(action, instance, data), diff=diff)
    try:
        done = actions.instance_act(
            user=request.user,
            origin=Origin.of_request(request),
            instance_id=instance.id,
            action=spec.name,
            reason=form.cleaned_data["reason"],
            arguments=form.engine_kwargs(),
            expected_version=form.cleaned_data["expected_version"] or None,
        )
    except StaleState as exc:
        # Shown as it is now: the form carries the new version, so confirming again acts on
        # what this answer shows.
        data = request.POST.copy()
        data["expected_version"] = staleness.instance_version(instance_id=instance.id)
        return _confirm(request, instance, spec, _form(action, instance, data), status=409, stale=exc.message)
    except ActionRefused as exc:
        if exc.status in (403, 404):
            raise _refusal(exc) from None
        return _confirm(request, instance, spec, form, status=exc.status, engine_error=exc.message)
    except (EngineError, InputRejected) as exc:
        return _confirm(request, instance, spec, form, status=409, engine_error=str(exc))
    target = done.target
    if spec.name == "replay":
        messages.success(request, f"Replay started as {target} (replay of {instance.id}).")
    elif spec.name == "fork":
        messages.success(
            request, f"Fork started as {target} (fork of {instance.id} from step {form.cleaned_data['from_step']})."
        )
    else:
        messages.success(request, f"{spec.label.rstrip('…')} requested for {instance.id}.")
    if request.htmx:  # posted from the dialog: the whole page goes to the instance, not the dialog
        return HttpResponseClientRedirect(reverse("instance-detail", args=[target]))
    return HttpResponseRedirect(reverse("instance-detail", args=[target]), status=303)
