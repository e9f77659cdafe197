"""What a notification says, per kind of message and per channel. Pure functions of values.

Every text here leaves the process (a webhook, a Slack message, an email, a callback), so each
passes through `ingest.engine.redaction` on its way out, whatever its facts were made from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ingest.engine import redact, redact_value


@dataclass(frozen=True)
class AlertView:
    """The facts of an alert a message is made of."""

    alert_id: int | None
    rule: str
    condition: str
    tenant: str
    group_key: str
    title: str
    count: int
    unsent: int
    facts: dict[str, Any]
    at: datetime


def subject(kind: str, view: AlertView) -> str:
    prefix = {"firing": "[ALERT]", "summary": "[ALERT, still firing]", "resolved": "[RESOLVED]", "test": "[TEST]"}.get(
        kind, "[ALERT]"
    )
    return redact(f"{prefix} {view.title} ({view.tenant})")[:300]


def text(payload: dict[str, Any], *, base_url: str = "") -> str:
    """The human text of a notification's payload (`webhook_payload`): an email body, a Slack message."""
    kind = payload["type"].removeprefix("alert.")
    lines = [payload["subject"]]
    if kind == "summary":
        lines.append(
            f"{payload['unsent']} more event(s) since the last notification; {payload['count']} in all since it fired."
        )
    elif kind == "resolved":
        lines.append(f"The condition cleared after {payload['count']} event(s).")
    elif kind == "test":
        lines.append("A test notification from Runledger: this channel works.")
    lines.append(f"Rule: {payload['rule']} ({payload['condition']}); group: {payload['group']}")
    facts = payload.get("facts") or {}
    for key, value in sorted(facts.items()):
        if value not in ("", None):
            lines.append(f"{key}: {str(value)[:500]}")
    if facts.get("instance") and base_url:
        lines.append(f"{base_url.rstrip('/')}/instances/{facts['instance']}/")
    return redact("\n".join(lines))


def webhook_payload(kind: str, view: AlertView) -> dict[str, Any]:
    """The generic webhook's JSON: a stable, typed event."""
    payload: dict[str, Any] = redact_value(
        {
            "type": f"alert.{kind}",
            "subject": subject(kind, view),
            "alert_id": view.alert_id,
            "rule": view.rule,
            "condition": view.condition,
            "tenant": view.tenant,
            "group": view.group_key,
            "title": view.title,
            "count": view.count,
            "unsent": view.unsent,
            "facts": view.facts,
            "at": view.at.isoformat(),
        }
    )
    return payload


def slack_payload(payload: dict[str, Any], *, base_url: str = "") -> dict[str, Any]:
    """A Slack-compatible incoming webhook takes `{"text": ...}` (Mattermost and Rocket.Chat too)."""
    return {"text": text(payload, base_url=base_url)}


def callback_payload(
    *,
    instance_id: str,
    workflow: str,
    tenant: str,
    status: str,
    output: Any,
    error_name: str,
    error_message: str,
    ended_at: datetime | None,
) -> dict[str, Any]:
    """What a callback URL receives when its instance ends. The error message is redacted; the
    output is the workflow's answer to its caller, as the API shows it (a sensitive step's
    result never reaches it in clear: it is sealed)."""
    return {
        "type": "instance.finished",
        "instance_id": instance_id,
        "workflow": workflow,
        "tenant": tenant,
        "status": status,
        "output": output,
        "error": {"name": error_name, "message": redact(error_message)} if error_name else None,
        "ended_at": ended_at.isoformat() if ended_at else None,
    }
