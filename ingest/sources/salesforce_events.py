"""Salesforce pushes: Change Data Capture events and Outbound Message SOAP posts (pure parsing).

CDC events arrive as JSON (CometD `/data/OpportunityChangeEvent` messages, or the decoded
Pub/Sub API payload); Outbound Messages arrive as SOAP envelopes and must be answered with
`outbound_ack()`, or Salesforce redelivers them for up to 24 hours.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ingest.sources.salesforce import SalesforceError

OUTBOUND_NS = "http://soap.sforce.com/2005/09/outbound"
SOAP_NS = "http://schemas.xmlsoap.org/soap/envelope/"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
_NS = {"soap": SOAP_NS, "out": OUTBOUND_NS}


class SalesforceEventInvalid(SalesforceError):
    """The Salesforce push is not a Change Data Capture event or Outbound Message we understand."""


@dataclass(frozen=True)
class ChangeEvent:
    entity_name: str
    change_type: str  # CREATE UPDATE DELETE UNDELETE, or GAP_* / GAP_OVERFLOW
    record_ids: tuple[str, ...]
    changed_fields: tuple[str, ...]
    commit_timestamp: datetime
    fields: dict[str, Any] = field(default_factory=dict)
    nulled_fields: tuple[str, ...] = ()
    diff_fields: tuple[str, ...] = ()
    commit_number: int | None = None
    commit_user: str = ""
    transaction_key: str = ""
    sequence_number: int | None = None
    change_origin: str = ""
    replay_id: int | None = None

    @property
    def is_gap(self) -> bool:
        """Gap events carry no field values: read the records through the REST API instead."""
        return self.change_type.startswith("GAP_")


def _payload(message: Mapping[str, Any]) -> tuple[Mapping[str, Any], int | None]:
    data = message.get("data", message)
    payload = data.get("payload", data)
    replay = (data.get("event") or {}).get("replayId")
    return payload, None if replay is None else int(replay)


def parse_change_event(message: Mapping[str, Any]) -> ChangeEvent:
    """A CDC event from a CometD message, its `data`, or the bare payload."""
    payload, replay_id = _payload(message)
    header = payload.get("ChangeEventHeader")
    if not isinstance(header, Mapping):
        raise SalesforceEventInvalid(
            f"CDC event has no ChangeEventHeader (keys: {sorted(payload)}); "
            "subscribe to a /data/…ChangeEvent channel"
        )
    try:
        stamp = datetime.fromtimestamp(int(header["commitTimestamp"]) / 1000, tz=UTC)
        return ChangeEvent(
            entity_name=str(header["entityName"]),
            change_type=str(header["changeType"]),
            record_ids=tuple(str(i) for i in header.get("recordIds") or ()),
            changed_fields=tuple(header.get("changedFields") or ()),
            commit_timestamp=stamp,
            fields={k: v for k, v in payload.items() if k != "ChangeEventHeader"},
            nulled_fields=tuple(header.get("nulledFields") or ()),
            diff_fields=tuple(header.get("diffFields") or ()),
            commit_number=header.get("commitNumber"),
            commit_user=str(header.get("commitUser") or ""),
            transaction_key=str(header.get("transactionKey") or ""),
            sequence_number=header.get("sequenceNumber"),
            change_origin=str(header.get("changeOrigin") or ""),
            replay_id=replay_id,
        )
    except (KeyError, TypeError, ValueError) as error:
        raise SalesforceEventInvalid(
            f"CDC ChangeEventHeader is missing or has a bad {error}"
        ) from error


@dataclass(frozen=True)
class OutboundNotification:
    id: str  # the notification id: Salesforce redelivers with the same id
    sobject_type: str
    record_id: str
    fields: dict[str, str | None]


@dataclass(frozen=True)
class OutboundMessage:
    organization_id: str
    action_id: str
    session_id: str | None
    enterprise_url: str
    partner_url: str
    notifications: tuple[OutboundNotification, ...]


def _text(parent: ET.Element, name: str) -> str | None:
    node = parent.find(f"out:{name}", _NS)
    if node is None or node.get(f"{{{XSI_NS}}}nil") == "true":
        return None
    return (node.text or "").strip()


def _notification(node: ET.Element) -> OutboundNotification:
    sobject = node.find("out:sObject", _NS)
    if sobject is None:
        raise SalesforceEventInvalid("Outbound Message notification has no sObject element")
    fields: dict[str, str | None] = {}
    for child in sobject:
        name = child.tag.rsplit("}", 1)[-1]
        nil = child.get(f"{{{XSI_NS}}}nil") == "true"
        fields[name] = None if nil else (child.text or "").strip()
    declared = sobject.get(f"{{{XSI_NS}}}type") or ""
    return OutboundNotification(
        id=_text(node, "Id") or "",
        sobject_type=declared.rsplit(":", 1)[-1],
        record_id=fields.get("Id") or "",
        fields=fields,
    )


def parse_outbound_message(body: bytes | str) -> OutboundMessage:
    """The notifications in an Outbound Message SOAP post."""
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    # Outbound Messages never carry a DTD; refusing one rules out entity-expansion attacks.
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise SalesforceEventInvalid("Outbound Message contains a DTD; refusing to parse it")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as error:
        raise SalesforceEventInvalid(
            f"Outbound Message is not well-formed XML ({error})"
        ) from error
    notifications = root.find("soap:Body/out:notifications", _NS)
    if notifications is None:
        raise SalesforceEventInvalid(
            "SOAP body has no <notifications> element in the outbound namespace "
            f"{OUTBOUND_NS}; is this an Outbound Message?"
        )
    return OutboundMessage(
        organization_id=_text(notifications, "OrganizationId") or "",
        action_id=_text(notifications, "ActionId") or "",
        session_id=_text(notifications, "SessionId"),
        enterprise_url=_text(notifications, "EnterpriseUrl") or "",
        partner_url=_text(notifications, "PartnerUrl") or "",
        notifications=tuple(
            _notification(node) for node in notifications.findall("out:Notification", _NS)
        ),
    )


OUTBOUND_ACK_CONTENT_TYPE = "text/xml; charset=utf-8"


def outbound_ack(ack: bool = True) -> str:
    """The SOAP response body Salesforce expects; `false` makes it redeliver later."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<soapenv:Envelope xmlns:soapenv="{SOAP_NS}">'
        "<soapenv:Body>"
        f'<notificationsResponse xmlns="{OUTBOUND_NS}">'
        f"<Ack>{'true' if ack else 'false'}</Ack>"
        "</notificationsResponse>"
        "</soapenv:Body>"
        "</soapenv:Envelope>"
    )
