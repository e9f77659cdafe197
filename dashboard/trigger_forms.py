"""Forms of the schedules, routes and subscriptions pages. The services validate the meaning
(cron, time zone, coalesce, route and subscription settings) and stay the authority: each form's
`clean` runs the service's own check (`*_problems`) on what it read, so every wrong field is named
at once, each on its field, with the message the REST API and the CLI give for the same input."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from ingest.triggers import limits
from ingest.triggers.errors import InputRejected, InvalidFields, MalformedJson, TriggerError
from ingest.triggers.field_checks import UNSET
from ingest.triggers.models import MissedFirePolicy, Route, Schedule
from ingest.triggers.services import route_problems, schedule_problems, subscription_problems
from ingest.triggers.services.routes import EDITABLE
from ingest.triggers.services.schedules import CATCH_UP_MAX


def add_problems(form: forms.Form, problems: dict[str, str]) -> None:
    """Put a service's problems on the form: each on its field (unless the field already has an
    error of its own), the rest above the form."""
    for field, message in problems.items():
        if field in form.fields and field != "__all__":
            if field not in form.errors:
                form.add_error(field, message)
        else:
            form.add_error(None, message)


def add_refusal(form: forms.Form, exc: TriggerError) -> None:
    """Put a service's refusal on the form: its problems by field, or its message above the form."""
    add_problems(form, exc.problems if isinstance(exc, InvalidFields) and exc.problems else {"__all__": str(exc)})


def _choices(form: forms.Form, name: str, values: list[str], labels: dict[str, str] | None = None) -> None:
    field = form.fields[name]
    assert isinstance(field, forms.ChoiceField)
    field.choices = [(v, (labels or {}).get(v, v)) for v in values]


class JSONObjectField(forms.CharField):
    """A JSON object typed in a textarea; blank is `{}` or None as `blank_value` says."""

    def __init__(self, *, blank_value: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.blank_value = blank_value
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 4, "class": "mono"}))
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> Any:
        return value if isinstance(value, str) else ("" if value is None else json.dumps(value, indent=2))

    def clean(self, value: Any) -> dict[str, Any] | None:
        text = super().clean(value)
        if not text.strip():
            return self.blank_value
        try:  # within the input limits: no 5,000-digit number, no RecursionError, no NUL
            parsed = limits.json_parse(text, limits=limits.input_limits(), what="this field")
        except MalformedJson as exc:
            raise forms.ValidationError(f'{exc}; write an object such as {{"customer": "acme"}}') from None
        except InputRejected as exc:
            raise forms.ValidationError(str(exc)) from None
        if not isinstance(parsed, dict):
            raise forms.ValidationError(f"a JSON object is expected, not {type(parsed).__name__}")
        return parsed


class ScheduleForm(forms.Form):
    cron = forms.CharField(
        max_length=200,
        strip=True,
        help_text="Five fields (minute hour day-of-month month day-of-week) with L, W, LW, # and 5L, "
        "e.g. '59 23 LW * *' for the last weekday of the month at 23:59.",
    )
    timezone = forms.CharField(
        max_length=64, strip=True, initial="UTC", help_text="An IANA name such as UTC or Europe/Paris."
    )
    missed_fire_policy = forms.ChoiceField(
        choices=MissedFirePolicy.choices,
        label="Missed fires",
        help_text="What the scheduler does with fires missed while it was down.",
    )
    catch_up_limit = forms.IntegerField(
        min_value=1,
        max_value=CATCH_UP_MAX,
        initial=1,
        help_text="With catch up: how many of the latest missed fires run.",
    )
    params = JSONObjectField(blank_value={}, help_text="The JSON object each fire's instance gets.")

    def schedule_fields(self) -> dict[str, Any]:
        names = ("workflow", "cron", "timezone", "missed_fire_policy", "catch_up_limit", "params", "enabled")
        return {k: self.cleaned_data[k] for k in names if k in self.cleaned_data}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        name = cleaned.get("name", UNSET) if "name" in self.fields else UNSET
        add_problems(self, schedule_problems(self.schedule_fields(), name=name))
        return cleaned


class ScheduleCreateForm(ScheduleForm):
    """A new schedule: its name, the workflow it starts and the tenant it runs in (one the user
    operates), then the same fields as an edit."""

    name = forms.CharField(
        max_length=60,
        strip=True,
        help_text="1 to 60 letters, digits, '_' or '-'; it prefixes the ids of "
        "the instances it starts (nightly-sync-20261122T0300Z).",
    )
    workflow = forms.ChoiceField(help_text="The workflow each fire starts.")
    tenant = forms.ChoiceField(help_text="The tenant its instances run in (one you operate).")
    enabled = forms.BooleanField(required=False, initial=True, help_text="Fire on the cron from now on.")
    field_order = [
        "name",
        "workflow",
        "tenant",
        "cron",
        "timezone",
        "missed_fire_policy",
        "catch_up_limit",
        "params",
        "enabled",
    ]

    def __init__(self, *args: Any, workflows: list[str], tenants: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choices(self, "workflow", workflows)
        _choices(self, "tenant", tenants)

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        if Schedule.objects.filter(name=name).exists():
            raise forms.ValidationError(f"a schedule is already named {name!r}; pick another name")
        return name


class CoalesceForm(forms.Form):
    """A route's or subscription's coalesce setting as JSON; blank turns coalescing off."""

    coalesce = JSONObjectField(
        blank_value=None,
        label="Coalesce",
        help_text='Debounce or batch events per key, e.g. {"debounce": {"key": "account", "period": '
        '"30 seconds"}} or {"batch": {"key": "account", "max_size": 100, "timeout": "10 seconds"}}; '
        "blank turns it off.",
    )


class RouteForm(forms.Form):
    """A route's settings; the service's own check (`route_problems`) runs in `clean`, so every
    wrong field carries its message in one answer."""

    workflow = forms.ChoiceField(help_text="The workflow a request starts, with the body as its params.")
    enabled = forms.BooleanField(required=False, initial=True, help_text="Disabled: requests answer 409.")
    sync_default = forms.BooleanField(
        required=False,
        label="Wait for the output",
        help_text="Answer with the output unless the caller passes ?wait=0.",
    )
    wait_seconds = forms.FloatField(
        initial=30.0, label="Wait (seconds)", help_text="How long a waiting request waits for the output."
    )
    rate_limit_per_minute = forms.IntegerField(
        required=False, label="Rate limit (per minute)", help_text="Requests a minute for this route; empty: no limit."
    )
    idempotency_ttl_seconds = forms.IntegerField(
        initial=24 * 3600,
        label="Idempotency keys live (seconds)",
        help_text="A repeated Idempotency-Key within this time returns the first instance.",
    )
    priority = forms.IntegerField(initial=0, help_text="Higher runs first when workers are busy.")
    description = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}), help_text="What calls it, for the next operator."
    )

    def __init__(self, *args: Any, workflows: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choices(self, "workflow", workflows)

    def route_fields(self) -> dict[str, Any]:
        return {k: self.cleaned_data[k] for k in EDITABLE if k in self.cleaned_data}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        name = cleaned.get("name", UNSET) if "name" in self.fields else UNSET
        add_problems(self, route_problems(self.route_fields(), name=name))
        return cleaned


class RouteCreateForm(RouteForm):
    name = forms.CharField(
        max_length=100, strip=True, help_text="Letters, digits, '_' or '-': requests go to POST /api/routes/<name>."
    )
    tenant = forms.ChoiceField(
        help_text="The tenant its instances run in (one you operate); callers "
        "sign with an ingress credential of this tenant."
    )
    field_order = ["name", "tenant", *EDITABLE]

    def __init__(self, *args: Any, tenants: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choices(self, "tenant", tenants)

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        if Route.objects.filter(name=name).exists():
            raise forms.ValidationError(f"a route is already named {name!r}; pick another name")
        return name


class SubscriptionForm(forms.Form):
    """A subscription's settings; the service's own check (`subscription_problems`) runs in
    `clean`, so every wrong field carries its message in one answer."""

    pattern = forms.CharField(
        max_length=200,
        strip=True,
        label="Event type pattern",
        help_text="A glob over event types: user.*, gong.call.*, invoice.paid.",
    )
    workflow = forms.ChoiceField(
        help_text="The workflow each matching event starts, with the event's data as its params."
    )
    filters = JSONObjectField(
        blank_value={},
        help_text='Payload fields that must be equal, e.g. {"plan": "pro"}; a '
        "list means any of its values. Blank: every event.",
    )
    enabled = forms.BooleanField(required=False, initial=True, help_text="Disabled: matching events start nothing.")

    def __init__(self, *args: Any, workflows: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choices(self, "workflow", workflows)

    def subscription_fields(self) -> dict[str, Any]:
        return {
            k: self.cleaned_data[k] for k in ("workflow", "pattern", "filters", "enabled") if k in self.cleaned_data
        }

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        add_problems(self, subscription_problems(self.subscription_fields()))
        return cleaned


class SubscriptionCreateForm(SubscriptionForm):
    tenant = forms.ChoiceField(
        required=False, help_text="Whose events it starts from: a tenant you operate, or every tenant (staff only)."
    )
    field_order = ["pattern", "workflow", "tenant", "filters", "enabled"]

    def __init__(self, *args: Any, tenants: list[str], every_tenant: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.every_tenant = every_tenant
        # Every tenant last: a global subscription is never the choice a staff user did not make.
        _choices(self, "tenant", tenants + ([""] if every_tenant else []), {"": "every tenant"})
        if tenants:
            self.fields["tenant"].initial = tenants[0]

    def clean_tenant(self) -> str:
        tenant: str = self.cleaned_data["tenant"]
        if not tenant and not self.every_tenant:
            raise forms.ValidationError(
                "a subscription for every tenant's events is made by staff; pick a tenant you operate"
            )
        return tenant
