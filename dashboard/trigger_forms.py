"""Forms of the schedules, routes and subscriptions pages. Field checks only; the services
validate the meaning (cron, time zone, coalesce) and their refusals land on the field they name."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from ingest.triggers.models import MissedFirePolicy


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
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not valid JSON ({exc.msg} at line {exc.lineno}); write an "
                                        'object such as {"customer": "acme"}') from None
        if not isinstance(parsed, dict):
            raise forms.ValidationError(f"a JSON object is expected, not {type(parsed).__name__}")
        return parsed


class ScheduleForm(forms.Form):
    cron = forms.CharField(
        max_length=200, strip=True,
        help_text="Five fields (minute hour day-of-month month day-of-week) with L, W, LW, # and 5L, "
                  "e.g. '59 23 LW * *' for the last weekday of the month at 23:59.")
    timezone = forms.CharField(max_length=64, strip=True, initial="UTC",
                               help_text="An IANA name such as UTC or Europe/Paris.")
    missed_fire_policy = forms.ChoiceField(
        choices=MissedFirePolicy.choices, label="Missed fires",
        help_text="What the scheduler does with fires missed while it was down.")
    catch_up_limit = forms.IntegerField(min_value=1, max_value=100, initial=1,
                                        help_text="With catch up: how many of the latest missed fires run.")
    params = JSONObjectField(blank_value={}, help_text="The JSON object each fire's instance gets.")


class CoalesceForm(forms.Form):
    """A route's or subscription's coalesce setting as JSON; blank turns coalescing off."""

    coalesce = JSONObjectField(
        blank_value=None, label="Coalesce",
        help_text='Debounce or batch events per key, e.g. {"debounce": {"key": "account", "period": '
                  '"30 seconds"}} or {"batch": {"key": "account", "max_size": 100, "timeout": "10 seconds"}}; '
                  "blank turns it off.")
