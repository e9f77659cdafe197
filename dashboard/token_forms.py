"""The form of the API tokens page: a name and an optional lifetime in days. The service checks
the same bounds, so the management command and the page refuse the same input."""

from __future__ import annotations

from django import forms

from ingest.triggers.services.tokens import EXPIRES_DAYS_MAX, NAME_MAX


class ApiTokenForm(forms.Form):
    name = forms.CharField(
        max_length=NAME_MAX,
        strip=True,
        help_text='What uses it, so you know which one to revoke: "laptop cli", "nightly export".',
        widget=forms.TextInput(attrs={"autocomplete": "off", "placeholder": "laptop cli"}),
    )
    expires_days = forms.IntegerField(
        label="Expires after (days)",
        required=False,
        min_value=1,
        max_value=EXPIRES_DAYS_MAX,
        help_text=f"1 to {EXPIRES_DAYS_MAX}; empty: it works until you revoke it.",
        widget=forms.NumberInput(attrs={"inputmode": "numeric", "placeholder": "90"}),
    )
