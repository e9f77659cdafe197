"""Forms of the ingress credentials: a new credential, and a rotation's reason and overlap. Each
form's `clean` runs the service's own check, so the console refuses what the REST API and the CLI
refuse, with the same message on each field."""

from __future__ import annotations

from typing import Any

from django import forms

from dashboard.trigger_forms import add_problems
from ingest.triggers.models import IngressSecret
from ingest.triggers.services import ingress_secret_problems, rotation_problems
from ingest.triggers.services.credentials import OVERLAP_DEFAULT, REASON_MAX

# How long the replaced pair keeps working; the API takes any number of seconds up to 7 days.
OVERLAPS = [
    (0, "No overlap: the old pair stops at once"),
    (300, "5 minutes"),
    (900, "15 minutes"),
    (3600, "1 hour"),
    (6 * 3600, "6 hours"),
    (24 * 3600, "1 day"),
    (7 * 24 * 3600, "7 days"),
]


class CredentialForm(forms.Form):
    tenant = forms.ChoiceField(help_text="The tenant whose routes it signs requests for (one you operate).")
    name = forms.CharField(
        max_length=100,
        strip=True,
        initial="default",
        help_text="Letters, digits, '_', '.' or '-', to tell a tenant's callers apart: shop-webhook, crm.",
    )
    rate_limit_per_minute = forms.IntegerField(
        required=False,
        label="Rate limit (per minute)",
        help_text="Requests a minute across the tenant's routes with this credential; empty: no limit.",
    )

    def __init__(self, *args: Any, tenants: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["tenant"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(t, t) for t in tenants]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if "rate_limit_per_minute" not in self.errors:
            add_problems(
                self,
                ingress_secret_problems(
                    tenant=cleaned.get("tenant", ""),
                    name=cleaned.get("name", ""),
                    rate_limit_per_minute=cleaned.get("rate_limit_per_minute"),
                ),
            )
        tenant, name = cleaned.get("tenant"), cleaned.get("name")
        if not self.errors and IngressSecret.objects.filter(tenant=tenant, name=name).exists():
            self.add_error(
                "name",
                f"tenant {tenant!r} already has a credential named {name!r}; pick another name, or rotate that one",
            )
        return cleaned


class RotateForm(forms.Form):
    reason = forms.CharField(
        max_length=REASON_MAX,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='Kept in the audit log: "yearly rotation", "token pasted in a ticket".',
    )
    overlap_seconds = forms.TypedChoiceField(
        coerce=int,
        choices=OVERLAPS,
        initial=OVERLAP_DEFAULT,
        label="The old pair keeps working for",
        help_text="Time for the callers to switch to the new pair; after it, the old one is refused (401).",
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        add_problems(
            self, rotation_problems(overlap_seconds=cleaned.get("overlap_seconds", 0), reason=cleaned.get("reason", ""))
        )
        return cleaned
