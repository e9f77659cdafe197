"""Forms of the operations pages. The approval form is built at runtime from the request's schema."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.core.validators import RegexValidator
from django.utils import timezone

from dashboard.actions import (
    INSTANCE_ID_PATTERN,
    PRIORITY_RANGE,
    ActionRefused,
    params_check,
    start_attributes_check,
)
from ingest.engine.models import BreachPolicy, BudgetPeriod, BudgetScope
from ingest.triggers import limits
from ingest.triggers.errors import InputRejected

FIELD_TYPES = ("text", "number", "boolean", "choice", "textarea")
START_AHEAD_MAX = timedelta(days=365)  # as far ahead as an instance may sleep


class ReasonForm(forms.Form):
    """Every operator action says why; the reason lands in the history beside the user."""

    reason = forms.CharField(
        max_length=500,
        strip=True,
        widget=forms.TextInput(attrs={"size": 48}),
        help_text="Why you are doing this: recorded in the history with your name.",
    )


class RedriveForm(ReasonForm):
    rate_per_second = forms.FloatField(
        min_value=0.1,
        max_value=50.0,
        initial=5.0,
        help_text="Instances restarted per second, so a redrive does not stampede the providers.",
    )


def _choices(spec: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for c in spec.get("choices") or []:
        if isinstance(c, (list, tuple)) and len(c) == 2:
            out.append((str(c[0]), str(c[1])))
        elif isinstance(c, dict):
            out.append((str(c.get("value", "")), str(c.get("label", c.get("value", "")))))
        else:
            out.append((str(c), str(c)))
    return out


def schema_field(spec: dict[str, Any]) -> forms.Field:
    """One Django field for one entry of an approval's `fields` schema."""
    kind = spec.get("type", "text")
    common: dict[str, Any] = {
        "label": spec.get("label") or spec.get("name"),
        "required": bool(spec.get("required", False)),
        "initial": spec.get("default"),
        "help_text": spec.get("help", ""),
    }
    if kind == "number":
        # Bounded: an unbounded Decimal of 5,000 digits cannot become JSON (Python refuses to
        # print ints past 4,300 digits).
        return forms.DecimalField(max_digits=30, decimal_places=10, **common)
    if kind == "boolean":
        # A required checkbox would force "yes"; booleans are always optional yes/no.
        common["required"] = False
        return forms.BooleanField(**common)
    if kind == "choice":
        choices = _choices(spec)
        if not common["required"]:
            choices = [("", "—"), *choices]
        return forms.ChoiceField(choices=choices, **common)
    if kind == "textarea":
        return forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), **common)
    return forms.CharField(max_length=2000, **common)


class ApprovalAnswerForm(forms.Form):
    """approve/reject, a comment, and the request's own fields (prefixed `f_` to avoid clashes)."""

    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    comment = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 3}))
    schema: list[dict[str, Any]] = []
    grants_budget = False  # approving grants budget: an `amount` field must be positive

    def schema_fields(self) -> list[forms.BoundField]:
        return [self[f"f_{spec['name']}"] for spec in self.schema]

    def values(self) -> dict[str, Any]:
        """The validated values keyed by schema name, JSON-ready (numbers as int or float)."""
        out: dict[str, Any] = {}
        for spec in self.schema:
            v = self.cleaned_data.get(f"f_{spec['name']}")
            if isinstance(v, Decimal):
                v = int(v) if v == v.to_integral_value() else float(v)
            out[spec["name"]] = v
        return out

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        # Rejecting needs no values: the schema describes what an approval carries.
        if data.get("decision") == "reject":
            for spec in self.schema:
                key = f"f_{spec['name']}"
                if key in self.errors and key not in data:
                    del self.errors[key]
        elif self.grants_budget and "f_amount" in self.fields:
            amount = data.get("f_amount")
            if isinstance(amount, (int, float, Decimal)) and amount <= 0:
                self.add_error("f_amount", f"the amount granted must be positive; got {amount}")
        return data


def approval_form_class(schema: list[dict[str, Any]], *, grants_budget: bool = False) -> type[ApprovalAnswerForm]:
    """A Form class with one field per schema entry; unknown types read as text. A request that
    grants budget when approved (`grants_budget`) refuses an amount that is not positive as a
    field error, before the engine is asked."""
    valid = [s for s in schema if isinstance(s, dict) and s.get("name")]
    attrs: dict[str, Any] = {f"f_{s['name']}": schema_field(s) for s in valid}
    attrs["schema"] = valid
    attrs["grants_budget"] = grants_budget
    return type("ApprovalForm", (ApprovalAnswerForm,), attrs)


class BudgetForm(forms.Form):
    scope = forms.ChoiceField(choices=BudgetScope.choices)
    key = forms.CharField(max_length=200, help_text="The tenant, workflow, service or instance id.")
    period = forms.ChoiceField(choices=BudgetPeriod.choices)
    limit = forms.DecimalField(max_digits=14, decimal_places=6, min_value=Decimal("0"))
    policy = forms.ChoiceField(
        choices=BreachPolicy.choices,
        help_text="fail: the step fails as non-retryable. approval: the instance pauses for an operator.",
    )

    def __init__(self, *args: Any, allowed_scopes: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        scope_field = self.fields["scope"]
        assert isinstance(scope_field, forms.ChoiceField)
        scope_field.choices = [c for c in BudgetScope.choices if c[0] in allowed_scopes]


class ReplayForm(ReasonForm):
    params = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false"}),
        help_text="The new instance's params as a JSON object. Leave as is to replay unchanged.",
    )

    def __init__(self, *args: Any, original: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.original = original  # the replayed instance's params: reserved keys may stay as they were
        super().__init__(*args, **kwargs)

    def clean_params(self) -> dict[str, Any]:
        try:  # within the input limits: no NUL, no 5,000-digit number, no RecursionError
            value = limits.json_parse(self.cleaned_data["params"], limits=limits.input_limits(), what="params")
            if not isinstance(value, dict):
                raise forms.ValidationError("params must be a JSON object ({...})")
            limits.reserved_params_check(value, original=self.original)
        except InputRejected as exc:
            raise forms.ValidationError(str(exc)) from None
        return value


def params_diff(before: Any, after: Any) -> list[tuple[str, str]]:
    """A line diff of two JSON values, pretty-printed with sorted keys: [(kind, line)]."""
    import difflib

    a = json.dumps(before, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    b = json.dumps(after, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    out: list[tuple[str, str]] = []
    for line in difflib.unified_diff(a, b, "original", "edited", lineterm="", n=2):
        if line.startswith(("---", "+++")):
            continue
        kind = {"@": "hdr", "+": "add", "-": "del"}.get(line[:1], "ctx")
        out.append((kind, line))
    return out


class StartForm(forms.Form):
    """Start a run of one workflow by hand: every field is checked, every error shown at once."""

    params = forms.CharField(
        initial="{}",
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false", "class": "mono"}),
        help_text='The run\'s params as a JSON object, e.g. {"account": "acme"}.',
    )
    tenant = forms.ChoiceField(help_text="The tenant the run belongs to: one where you are an operator.")
    id = forms.CharField(
        required=False,
        max_length=100,
        label="Instance id",
        validators=[
            RegexValidator(INSTANCE_ID_PATTERN, "an id is letters, digits, _ and -, and does not start with -")
        ],
        help_text="Optional; a new one is made. A run with this id already started is refused.",
    )
    priority = forms.IntegerField(
        initial=0,
        min_value=PRIORITY_RANGE[0],
        max_value=PRIORITY_RANGE[1],
        help_text="Higher runs first when workers are busy.",
    )
    start_at = forms.DateTimeField(
        required=False,
        label="Start at (UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text="Optional; empty starts now.",
    )
    search_attributes = forms.CharField(
        required=False,
        label="Search attributes",
        widget=forms.Textarea(
            attrs={"rows": 3, "spellcheck": "false", "class": "mono", "placeholder": "customer=acme\nbackfill=true"}
        ),
        help_text="Optional; one key=value a line, to find the run by in the instances list "
        "(e.g. customer=acme). Keys are lower-case letters, digits and _.",
    )

    def __init__(self, *args: Any, tenants: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tenant = self.fields["tenant"]
        assert isinstance(tenant, forms.ChoiceField)
        tenant.choices = [(t, t) for t in tenants]

    def clean_params(self) -> dict[str, Any]:
        raw = self.cleaned_data["params"] or "{}"
        try:  # within the input limits: no NUL, no 5,000-digit number, no RecursionError
            value = limits.json_parse(raw, limits=limits.input_limits(), what="params")
            return params_check(value)
        except (InputRejected, ActionRefused) as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_search_attributes(self) -> dict[str, str]:
        """`key=value` lines as the engine stores them; every bad line named at once."""
        values: dict[str, str] = {}
        problems: list[str] = []
        for number, line in enumerate(self.cleaned_data["search_attributes"].splitlines(), start=1):
            if not line.strip():
                continue
            key, equals, value = line.partition("=")
            key, value = key.strip(), value.strip()
            if not equals or not key:
                problems.append(f"line {number} is not key=value")
            elif key in values:
                problems.append(f"line {number} sets {key[:40]!r} a second time")
            elif not value:
                problems.append(f"line {number} gives {key[:40]!r} no value")
            else:
                values[key] = value
        if not problems:
            try:
                return start_attributes_check(values)
            except ActionRefused as exc:
                problems.append(str(exc))
        raise forms.ValidationError("; ".join(problems))

    def clean_start_at(self) -> datetime | None:
        value: datetime | None = self.cleaned_data["start_at"]
        if value is None:
            return None
        # The field reads a wall-clock time; the label says UTC, so it is taken as UTC whatever
        # the server's time zone.
        utc = timezone.make_naive(value).replace(tzinfo=UTC) if timezone.is_aware(value) else value.replace(tzinfo=UTC)
        if utc > timezone.now() + START_AHEAD_MAX:
            raise forms.ValidationError(
                f"start at most {START_AHEAD_MAX.days} days ahead; for a later start use a schedule"
            )
        return utc
