"""Salesforce pushes: Change Data Capture events and Outbound Message SOAP posts (pure parsing).

CDC events arrive as JSON (CometD `/data/OpportunityChangeEvent` messages, or the decoded
Pub/Sub API payload); Outbound Messages arrive as SOAP envelopes and must be answered with
`outbound_ack()`, or Salesforce redelivers them for up to 24 hours.
"""

from __future__ import annotations

import re
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


# Salesforce ids are 15 or 18 characters; a wildcard ("*") stands for many in a gap event.
_RECORD_ID = re.compile(r"^[A-Za-z0-9*]{1,18}$")
MAX_RECORD_IDS = 200  # per event; the hooks cap the records a whole post may start too
MAX_NOTIFICATIONS = 100  # Salesforce batches at most 100 notifications in one Outbound Message


def _payload(message: Mapping[str, Any]) -> tuple[Mapping[str, Any], int | None]:
    data = message.get("data", message)
    payload = data.get("payload", data) if isinstance(data, Mapping) else None
    if not isinstance(data, Mapping) or not isinstance(payload, Mapping):
        raise SalesforceEventInvalid("CDC message 'data' and its 'payload' must be JSON objects")
    event = data.get("event")
    replay = event.get("replayId") if isinstance(event, Mapping) else None
    try:
        return payload, None if replay is None else int(replay)
    except (TypeError, ValueError):
        raise SalesforceEventInvalid(f"CDC event replayId {str(replay)[:40]!r} is not an integer") from None


def _record_ids(header: Mapping[str, Any]) -> tuple[str, ...]:
    ids = header.get("recordIds") or ()
    if not isinstance(ids, list | tuple):
        raise SalesforceEventInvalid(f"CDC recordIds is a {type(ids).__name__}; it is a list of ids")
    if len(ids) > MAX_RECORD_IDS:
        raise SalesforceEventInvalid(
            f"CDC event lists {len(ids):,} recordIds; at most {MAX_RECORD_IDS} are accepted per event"
        )
    for record_id in ids:
        if not isinstance(record_id, str) or not _RECORD_ID.match(record_id):
            raise SalesforceEventInvalid(
                f"CDC recordIds holds {str(record_id)[:40]!r}, which is "
                "not a Salesforce id (15 or 18 letters and digits)"
            )
    return tuple(ids)


def parse_change_event(message: Mapping[str, Any]) -> ChangeEvent:
    """A CDC event from a CometD message, its `data`, or the bare payload."""
    payload, replay_id = _payload(message)
    header = payload.get("ChangeEventHeader")
    if not isinstance(header, Mapping):
        raise SalesforceEventInvalid(
            f"CDC event has no ChangeEventHeader (keys: {sorted(map(str, payload))[:20]}); "
            "subscribe to a /data/…ChangeEvent channel"
        )
    try:
        stamp = datetime.fromtimestamp(int(header["commitTimestamp"]) / 1000, tz=UTC)
        return ChangeEvent(
            entity_name=str(header["entityName"]),
            change_type=str(header["changeType"]),
            record_ids=_record_ids(header),
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
    except (KeyError, TypeError, ValueError, OverflowError, OSError) as error:
        # A commitTimestamp beyond the calendar overflows; a string where a list belongs.
        raise SalesforceEventInvalid(
            f"CDC ChangeEventHeader is missing or has a bad {type(error).__name__}: {str(error)[:200]}"
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
    record_id = fields.get("Id") or ""
    if not _RECORD_ID.match(record_id) or "*" in record_id:
        raise SalesforceEventInvalid(
            f"Outbound Message notification's sObject Id {record_id[:40]!r} "
            "is not a Salesforce id (15 or 18 letters and digits)"
        )
    return OutboundNotification(
        id=_text(node, "Id") or "",
        sobject_type=declared.rsplit(":", 1)[-1],
        record_id=record_id,
        fields=fields,
    )


def parse_outbound_message(body: bytes | str) -> OutboundMessage:
    """The notifications in an Outbound Message SOAP post."""
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
    except UnicodeDecodeError as error:
        raise SalesforceEventInvalid(f"Outbound Message is not UTF-8 ({error.reason} at byte {error.start})") from None
    # Outbound Messages never carry a DTD; refusing one rules out entity-expansion attacks.
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise SalesforceEventInvalid("Outbound Message contains a DTD; refusing to parse it")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as error:
        raise SalesforceEventInvalid(f"Outbound Message is not well-formed XML ({error})") from error
    notifications = root.find("soap:Body/out:notifications", _NS)
    if notifications is None:
        raise SalesforceEventInvalid(
            "SOAP body has no <notifications> element in the outbound namespace "
            f"{OUTBOUND_NS}; is this an Outbound Message?"
        )
    found = notifications.findall("out:Notification", _NS)
    if len(found) > MAX_NOTIFICATIONS:
        raise SalesforceEventInvalid(
            f"Outbound Message carries {len(found):,} notifications; "
            f"Salesforce sends at most {MAX_NOTIFICATIONS} per message"
        )
    return OutboundMessage(
        organization_id=_text(notifications, "OrganizationId") or "",
        action_id=_text(notifications, "ActionId") or "",
        session_id=_text(notifications, "SessionId"),
        enterprise_url=_text(notifications, "EnterpriseUrl") or "",
        partner_url=_text(notifications, "PartnerUrl") or "",
        notifications=tuple(_notification(node) for node in found),
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
