"""The Limits page's forms: set a tenant's concurrency limit on a workflow, or remove it. Each
carries the limit's version as the page showed it (the stale-state check)."""

from __future__ import annotations

from typing import Any

from django import forms

from ingest.engine.services.limits import MAX_CONCURRENT

VERSION_HELP = "the limit's version as the page showed it"


class LimitForm(forms.Form):
    workflow = forms.ChoiceField(help_text="A workflow whose instances are shared out by tenant.")
    tenant = forms.ChoiceField(help_text="A tenant you operate.")
    max_concurrent = forms.IntegerField(
        label="Max concurrent",
        min_value=1,
        max_value=MAX_CONCURRENT,
        help_text="At most this many of the tenant's instances of the workflow run at once, in "
        "place of the workflow's own cap. Remove the limit to fall back to that cap.",
    )
    version = forms.RegexField(regex=r"^[0-9]{1,20}$", widget=forms.HiddenInput, required=False, help_text=VERSION_HELP)

    def __init__(self, *args: Any, workflows: list[str], tenants: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, values in (("workflow", workflows), ("tenant", tenants)):
            field = self.fields[name]
            assert isinstance(field, forms.ChoiceField)
            field.choices = [(v, v) for v in values]


class LimitRemoveForm(forms.Form):
    workflow = forms.CharField(max_length=200)
    tenant = forms.CharField(max_length=200)
    version = forms.RegexField(regex=r"^[0-9]{1,20}$", help_text=VERSION_HELP)
