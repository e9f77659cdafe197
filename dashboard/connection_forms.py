"""The connection form of each kind: only the fields that kind reads, the secrets write-only (a
password field that renders empty, with what is stored shown as "set, ends ••••1234"; left empty it
keeps the stored value). `clean` runs the service's own check, so the console refuses what the
REST API and the CLI refuse, with the same message on each field."""

from __future__ import annotations

from typing import Any

from django import forms

from dashboard.trigger_forms import JSONObjectField, add_problems
from ingest.pipelines.connections import (
    KIND_FIELDS,
    PROVIDERS,
    SECRET_FIELDS,
    SECRET_MAX,
    TEXT_MAX,
    URL_MAX,
    connection_problems,
)
from ingest.pipelines.models import ConnectionKind

# (label, help) of each field, by kind where the kind names it its own way.
LABELS: dict[str, tuple[str, str]] = {
    "base_url": ("Base URL", "Empty: the provider's own address. A proxy, a sandbox or a local server's otherwise."),
    "key": ("Key", ""),
    "secret": ("Secret", ""),
    "refresh_token": ("Refresh token", "The connected app's OAuth refresh token; empty: the client credentials flow."),
    "webhook_key": (
        "Webhook key",
        "The key its webhooks carry in their URL (/hooks/<kind>/<key>): any long random "
        "text you also give the provider.",
    ),
    "organization_id": (
        "Organization id",
        "The org's 18-character id; outbound messages from another org are refused.",
    ),
    "provider": ("Provider", "openai: any OpenAI-compatible API; anthropic; rules and demo run offline."),
    "model": ("Model", "e.g. gpt-4o-mini or claude-3-5-haiku-latest; empty: the provider's default here."),
    "service": ("Service", "The name its costs are recorded under (openai, deepseek…); empty: the provider's."),
}
KIND_LABELS: dict[str, dict[str, tuple[str, str]]] = {
    ConnectionKind.GONG: {"key": ("Access key", "Gong's API access key."), "secret": ("Access key secret", "")},
    ConnectionKind.SALESFORCE: {
        "base_url": ("Login URL", "Empty: https://login.salesforce.com; a sandbox's is https://test.salesforce.com."),
        "key": ("Client id", "The connected app's consumer key."),
        "secret": ("Client secret", "The connected app's consumer secret."),
    },
    ConnectionKind.LLM: {"secret": ("API key", "Empty for a local server that takes none (openai only).")},
    ConnectionKind.DATAFORSEO: {
        "key": ("API login", "DataForSEO's API login (not the account's e-mail password)."),
        "secret": ("API password", ""),
    },
    ConnectionKind.ZENROWS: {"secret": ("API key", "")},
}


def label(kind: str, name: str) -> tuple[str, str]:
    return KIND_LABELS.get(kind, {}).get(name) or LABELS[name]


def _field(kind: str, name: str, stored: dict[str, str]) -> forms.Field:
    text, help_text = label(kind, name)
    if name in SECRET_FIELDS:
        ends = stored.get(name)
        said = f"Set, ends {ends}. Leave empty to keep it; type a new value to replace it." if ends else "Not set."
        return forms.CharField(
            required=False,
            label=text,
            max_length=SECRET_MAX,
            strip=True,
            help_text=" ".join(p for p in (help_text, said) if p),
            widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        )
    if name == "provider":
        return forms.ChoiceField(label=text, help_text=help_text, choices=[(p, p) for p in PROVIDERS])
    if name == "base_url":
        return forms.CharField(
            required=False,
            label=text,
            help_text=help_text,
            max_length=URL_MAX,
            strip=True,
            widget=forms.URLInput(attrs={"placeholder": "https://…"}),
        )
    return forms.CharField(required=False, label=text, help_text=help_text, max_length=TEXT_MAX, strip=True)


class ConnectionForm(forms.Form):
    """A new connection (`tenants` given: a tenant field) or an edit of one (`version` carried)."""

    options = JSONObjectField(
        blank_value={},
        label="Options (JSON)",
        help_text='Advanced: {"reconcile": false} turns the scheduled pulls off, '
        '{"rate_limit": {"per_second": 3, "burst": 1}} sets the rate, '
        '{"reconcile_lookback_minutes": 60} the pull\'s overlap.',
    )
    enabled = forms.BooleanField(
        required=False,
        initial=True,
        label="Enabled",
        help_text="A disabled connection is as if absent: the environment's settings apply.",
    )

    def __init__(
        self,
        *args: Any,
        kind: str,
        tenants: list[str] | None = None,
        stored: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind
        self.kind_label = ConnectionKind(kind).label
        self.stored = stored or {}
        fields: dict[str, forms.Field] = {}
        if tenants is not None:
            fields["tenant"] = forms.ChoiceField(
                choices=[(t, t) for t in tenants], help_text="A tenant you operate: its workflows use this connection."
            )
        else:
            fields["version"] = forms.CharField(widget=forms.HiddenInput, max_length=30)
        for name in KIND_FIELDS[kind]:
            fields[name] = _field(kind, name, self.stored)
        fields |= {"options": self.fields["options"], "enabled": self.fields["enabled"]}
        self.fields = fields

    def connection_fields(self) -> dict[str, Any]:
        """The checked fields as the service takes them (not the tenant or the version)."""
        return {k: v for k, v in self.cleaned_data.items() if k not in ("tenant", "version")}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        fields = {k: v for k, v in cleaned.items() if k not in ("tenant", "version") and k not in self.errors}
        stored = {k: "set" for k in self.stored} if self.stored else None
        add_problems(self, connection_problems(fields, kind=self.kind, stored=stored))
        return cleaned

    def secret_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in KIND_FIELDS[self.kind] if name in SECRET_FIELDS]

    def plain_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in KIND_FIELDS[self.kind] if name not in SECRET_FIELDS]
