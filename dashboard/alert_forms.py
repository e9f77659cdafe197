"""The Alerts page's forms: a channel and a rule. They check shapes (a number, JSON); what a
channel or rule may be is checked once, by ingest.alerts' services, whose refusal the view puts
on the form, so the page and the API refuse the same things with the same words."""

from __future__ import annotations

from typing import Any

from django import forms

from ingest.alerts.conditions import PARAMS
from ingest.alerts.models import Channel, ChannelKind, Condition
from ingest.triggers import limits
from ingest.triggers.errors import InputRejected

SECRET_HELP = "Stored as a secret and never shown again; leave blank to keep the current value."


class ChannelForm(forms.Form):
    tenant = forms.ChoiceField()
    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(
        choices=ChannelKind.choices,
        help_text="email: Django's mail backend or the SMTP server below; slack: an incoming "
        "webhook; webhook: a JSON POST signed with HMAC-SHA256 and a timestamp.",
    )
    to = forms.CharField(
        required=False,
        max_length=2000,
        label="Email recipients",
        help_text="Comma-separated addresses (email channels).",
    )
    smtp_host = forms.CharField(
        required=False, max_length=200, label="SMTP host", help_text="Blank: the server's configured mail backend."
    )
    smtp_port = forms.IntegerField(required=False, min_value=1, max_value=65535, label="SMTP port")
    smtp_username = forms.CharField(required=False, max_length=200, label="SMTP username")
    smtp_use_tls = forms.BooleanField(required=False, label="SMTP STARTTLS")
    smtp_password = forms.CharField(
        required=False, max_length=500, widget=forms.PasswordInput, label="SMTP password", help_text=SECRET_HELP
    )
    url = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.PasswordInput(render_value=False),
        label="Webhook URL",
        help_text=SECRET_HELP,
    )
    hmac_key = forms.CharField(
        required=False,
        max_length=500,
        widget=forms.PasswordInput,
        label="HMAC key",
        help_text="Signed webhooks: at least 16 characters. " + SECRET_HELP,
    )
    enabled = forms.BooleanField(required=False, initial=True)

    def __init__(self, *args: Any, tenants: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["tenant"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(t, t) for t in tenants]

    def service_arguments(self) -> dict[str, Any]:
        d = self.cleaned_data
        config: dict[str, Any] = {}
        if d["kind"] == ChannelKind.EMAIL:
            config["to"] = d["to"]
            if d["smtp_host"]:
                config["smtp"] = {
                    "host": d["smtp_host"],
                    "port": d["smtp_port"] or 25,
                    "username": d["smtp_username"],
                    "use_tls": d["smtp_use_tls"],
                }
        secrets = {k: d[k] for k in ("url", "hmac_key", "smtp_password") if d.get(k)}
        return {
            "tenant": d["tenant"],
            "name": d["name"],
            "kind": d["kind"],
            "config": config,
            "secrets": secrets,
            "enabled": d["enabled"],
        }


def channel_initial(channel: Channel) -> dict[str, Any]:
    smtp = channel.config.get("smtp") or {}
    return {
        "tenant": channel.tenant,
        "name": channel.name,
        "kind": channel.kind,
        "enabled": channel.enabled,
        "to": ", ".join(channel.config.get("to", [])),
        "smtp_host": smtp.get("host", ""),
        "smtp_port": smtp.get("port"),
        "smtp_username": smtp.get("username", ""),
        "smtp_use_tls": bool(smtp.get("use_tls")),
    }


def _params_help() -> str:
    return "; ".join(f"{c}: {', '.join(sorted(p)) or '—'}" for c, p in PARAMS.items())


class RuleForm(forms.Form):
    tenant = forms.ChoiceField()
    name = forms.CharField(max_length=100)
    condition = forms.ChoiceField(choices=Condition.choices)
    params = forms.CharField(
        required=False,
        initial="{}",
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="A JSON object. Parameters per condition: " + _params_help(),
    )
    channels = forms.MultipleChoiceField(help_text="Channels of the rule's tenant.")
    throttle_seconds = forms.IntegerField(
        min_value=0,
        max_value=604800,
        initial=600,
        help_text="One notification per group per window; the rest in a summary.",
    )
    notify_resolved = forms.BooleanField(required=False, initial=True, label="Notify when resolved")
    enabled = forms.BooleanField(required=False, initial=True)

    def __init__(self, *args: Any, tenants: list[str], channels: list[Channel], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tenant_field, channel_field = self.fields["tenant"], self.fields["channels"]
        assert isinstance(tenant_field, forms.ChoiceField) and isinstance(channel_field, forms.MultipleChoiceField)
        tenant_field.choices = [(t, t) for t in tenants]
        channel_field.choices = [(str(c.id), f"{c.tenant} / {c.name} ({c.kind})") for c in channels]

    def clean_params(self) -> dict[str, Any]:
        raw = (self.cleaned_data.get("params") or "").strip() or "{}"
        try:  # within the input limits: no 5,000-digit number, no RecursionError, no NUL
            value = limits.json_parse(raw, limits=limits.input_limits(), what="params")
        except InputRejected as exc:
            raise forms.ValidationError(str(exc)) from None
        if not isinstance(value, dict):
            raise forms.ValidationError('params must be a JSON object, e.g. {"workflow": "gong-ingest"}')
        return value

    def service_arguments(self) -> dict[str, Any]:
        d = self.cleaned_data
        return {
            "tenant": d["tenant"],
            "name": d["name"],
            "condition": d["condition"],
            "params": d["params"],
            "channel_ids": [int(c) for c in d["channels"]],
            "throttle_seconds": d["throttle_seconds"],
            "notify_resolved": d["notify_resolved"],
            "enabled": d["enabled"],
        }
