"""What an alert rule's params and a channel's settings must hold, by condition and by kind, as
JSON Schema: the fields that go together (ingest/alerts/conditions.py PARAMS, and
ingest/alerts/services.py channel_clean), so a client sees them before it is refused."""

from __future__ import annotations

from typing import Any

from dashboard.api.openapi import KEY_SCHEMA, TEXT_PATTERN
from dashboard.api.schemas import URL_PATTERN
from ingest.alerts.conditions import PARAMS
from ingest.alerts.models import ChannelKind, Condition
from ingest.alerts.services import MAX_RECIPIENTS, MIN_HMAC_KEY, SMTP_PORTS

EMAIL_PATTERN = r"^[A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*$"
MAX_PERCENT: dict[str, int] = {Condition.BUDGET_THRESHOLD: 1000}


def _param(condition: str, name: str, kind: type, minimum: float | None) -> dict[str, Any]:
    if kind is int:
        schema: dict[str, Any] = {"type": "integer", "minimum": int(minimum or 0)}
        if name == "percent" and condition in MAX_PERCENT:
            schema["maximum"] = MAX_PERCENT[condition]
        return schema
    return {"type": "string", "maxLength": 200, "pattern": TEXT_PATTERN}


def rule_variants() -> dict[str, Any]:
    """One variant per condition: its params, each optional (a default fills it in)."""
    return {
        "oneOf": [
            {
                "properties": {
                    "condition": {"const": str(condition)},
                    "params": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            name: _param(condition, name, kind, minimum) for name, (kind, _, minimum) in spec.items()
                        },
                    },
                }
            }
            for condition, spec in PARAMS.items()
        ]
    }


_URL = {"type": "string", "maxLength": 2000, "pattern": URL_PATTERN}
_SMTP = {
    "type": "object",
    "required": ["host"],
    "properties": {
        "host": {"type": "string", "pattern": r"^[A-Za-z0-9.-]+$"},
        "port": {"type": "integer", "minimum": SMTP_PORTS[0], "maximum": SMTP_PORTS[1]},
    },
}


def channel_variants() -> dict[str, Any]:
    """An email channel names its recipients in config; a Slack one its URL in secrets; a signed
    webhook its URL and an HMAC key of at least MIN_HMAC_KEY characters."""
    return {
        "oneOf": [
            {
                "required": ["config"],
                "properties": {
                    "kind": {"const": ChannelKind.EMAIL.value},
                    "config": {
                        "type": "object",
                        "propertyNames": KEY_SCHEMA,
                        "required": ["to"],
                        "properties": {
                            "to": {
                                "type": "array",
                                "minItems": 1,
                                "maxItems": MAX_RECIPIENTS,
                                "items": {
                                    "type": "string",
                                    "maxLength": 254,
                                    "pattern": EMAIL_PATTERN,
                                },
                            },
                            "smtp": _SMTP,
                        },
                    },
                },
            },
            {
                "required": ["secrets"],
                "properties": {
                    "kind": {"const": ChannelKind.SLACK.value},
                    "secrets": {"type": "object", "required": ["url"], "properties": {"url": _URL}},
                },
            },
            {
                "required": ["secrets"],
                "properties": {
                    "kind": {"const": ChannelKind.WEBHOOK.value},
                    "secrets": {
                        "type": "object",
                        "required": ["url", "hmac_key"],
                        "properties": {
                            "url": _URL,
                            "hmac_key": {
                                "type": "string",
                                "minLength": MIN_HMAC_KEY,
                                "maxLength": 1000,
                                "pattern": r"^[!-~]+$",
                            },
                        },
                    },
                },
            },
        ]
    }
