from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest

from ingest.sources.salesforce_events import (
    OUTBOUND_NS,
    SalesforceEventInvalid,
    outbound_ack,
    parse_change_event,
    parse_outbound_message,
)

pytestmark = pytest.mark.pure

CDC_MESSAGE = {
    "data": {
        "schema": "IeRuaY6cbI_HsV8Rv1Mc5g",
        "payload": {
            "ChangeEventHeader": {
                "entityName": "Opportunity",
                "recordIds": ["006RM000003bDwlYAE"],
                "changeType": "UPDATE",
                "changeOrigin": "com/salesforce/api/rest/62.0",
                "transactionKey": "0002343d-9d90-e395-ed20-cf416ba652ad",
                "sequenceNumber": 1,
                "commitTimestamp": 1741003200000,
                "commitNumber": 10648790,
                "commitUser": "005RM000001vI54YAE",
                "changedFields": ["StageName", "Amount", "LastModifiedDate"],
                "nulledFields": ["NextStep"],
                "diffFields": [],
            },
            "StageName": "Negotiation/Review",
            "Amount": 48000.0,
            "LastModifiedDate": "2025-03-03T12:00:00.000Z",
        },
        "event": {"replayId": 41},
    },
    "channel": "/data/OpportunityChangeEvent",
}

OUTBOUND = f"""<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"
  xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
 <soapenv:Body>
  <notifications xmlns="{OUTBOUND_NS}">
   <OrganizationId>00D000000000062EAA</OrganizationId>
   <ActionId>04k000000000008AAA</ActionId>
   <SessionId xsi:nil="true"/>
   <EnterpriseUrl>https://acme.my.salesforce.com/services/Soap/c/62.0/00D000000000062</EnterpriseUrl>
   <PartnerUrl>https://acme.my.salesforce.com/services/Soap/u/62.0/00D000000000062</PartnerUrl>
   <Notification>
    <Id>04l000000000001AAA</Id>
    <sObject xsi:type="sf:Opportunity" xmlns:sf="urn:sobject.enterprise.soap.sforce.com">
     <sf:Id>006000000000001AAA</sf:Id>
     <sf:Amount>50000.0</sf:Amount>
     <sf:NextStep xsi:nil="true"/>
     <sf:StageName>Proposal/Price Quote</sf:StageName>
    </sObject>
   </Notification>
   <Notification>
    <Id>04l000000000002AAA</Id>
    <sObject xsi:type="sf:Opportunity" xmlns:sf="urn:sobject.enterprise.soap.sforce.com">
     <sf:Id>006000000000002AAA</sf:Id>
     <sf:StageName>Closed Won</sf:StageName>
    </sObject>
   </Notification>
  </notifications>
 </soapenv:Body>
</soapenv:Envelope>"""


def test_it_parses_a_change_data_capture_message() -> None:
    event = parse_change_event(CDC_MESSAGE)

    assert event.entity_name == "Opportunity" and event.change_type == "UPDATE"
    assert event.record_ids == ("006RM000003bDwlYAE",)
    assert event.changed_fields == ("StageName", "Amount", "LastModifiedDate")
    assert event.nulled_fields == ("NextStep",)
    assert event.commit_timestamp == datetime(2025, 3, 3, 12, 0, tzinfo=UTC)
    assert event.fields == {
        "StageName": "Negotiation/Review",
        "Amount": 48000.0,
        "LastModifiedDate": "2025-03-03T12:00:00.000Z",
    }
    assert event.replay_id == 41 and not event.is_gap


def test_it_accepts_the_bare_payload_and_flags_gap_events() -> None:
    payload = dict(CDC_MESSAGE["data"]["payload"])  # type: ignore[index]
    payload["ChangeEventHeader"] = {**payload["ChangeEventHeader"], "changeType": "GAP_UPDATE"}

    event = parse_change_event(payload)

    assert event.is_gap and event.replay_id is None


def test_a_message_without_a_header_is_rejected_with_advice() -> None:
    with pytest.raises(SalesforceEventInvalid, match="ChangeEventHeader"):
        parse_change_event({"payload": {"StageName": "x"}})


def test_it_parses_outbound_message_notifications() -> None:
    message = parse_outbound_message(OUTBOUND.encode())

    assert message.organization_id == "00D000000000062EAA"
    assert message.session_id is None
    assert [n.id for n in message.notifications] == ["04l000000000001AAA", "04l000000000002AAA"]
    first = message.notifications[0]
    assert first.sobject_type == "Opportunity" and first.record_id == "006000000000001AAA"
    assert first.fields == {
        "Id": "006000000000001AAA",
        "Amount": "50000.0",
        "NextStep": None,
        "StageName": "Proposal/Price Quote",
    }


def test_the_ack_is_a_soap_envelope_saying_true() -> None:
    root = ET.fromstring(outbound_ack())

    ack = root.find(f".//{{{OUTBOUND_NS}}}notificationsResponse/{{{OUTBOUND_NS}}}Ack")
    assert ack is not None and ack.text == "true"
    assert "<Ack>false</Ack>" in outbound_ack(False)


def test_it_refuses_documents_with_a_dtd() -> None:
    bomb = '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>'
    with pytest.raises(SalesforceEventInvalid, match="DTD"):
        parse_outbound_message(bomb)


def test_a_soap_post_that_is_not_an_outbound_message_is_rejected() -> None:
    with pytest.raises(SalesforceEventInvalid, match="notifications"):
        parse_outbound_message('<e:Envelope xmlns:e="http://schemas.xmlsoap.org/soap/envelope/"><e:Body/></e:Envelope>')
