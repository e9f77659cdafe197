"""`connections-reconcile` against the fake Gong and Salesforce: what lost webhooks missed is
started from a pull, with the webhooks' own ids, so nothing is missed and nothing runs twice."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from ingest.demo.corpus import DemoCall, demo_calls, demo_opportunities
from ingest.engine import create, get
from ingest.engine.models import History, Instance
from ingest.pipelines.models import ConnectionCursor, Fact
from ingest.pipelines.services import connection_upsert, keyword_list_set
from ingest.workflows.reconcile import WORKFLOW
from tests.fakes import FakeGong, FakeSalesforce, Planned
from tests.fakes.gong import extensive_json

pytestmark = [pytest.mark.db, pytest.mark.django_db]
CALLS, LOST = 100, 10


def recent_calls(count: int, *, now: datetime) -> list[DemoCall]:
    """`count` demo calls that started in the last two hours, oldest first."""
    return [
        dataclasses.replace(call, started=now - timedelta(minutes=120) + timedelta(seconds=60 * i))
        for i, call in enumerate(demo_calls(count=count))
    ]


@pytest.fixture
def fake_gong() -> Iterator[FakeGong]:
    with FakeGong(recent_calls(CALLS, now=datetime.now(UTC)), page_size=100) as server:
        yield server


def post_webhook(client: Client, fake: FakeGong, call: DemoCall) -> None:
    body = json.dumps({"callData": extensive_json(call, fake.url), "isTest": False})
    response = client.post("/hooks/gong/hook-acme-123", body, content_type="application/json")
    assert response.status_code == 202, response.content


def reconcile(name: str, drain) -> dict:
    create(WORKFLOW, id=name, tenant="acme")
    drain()
    return get(name).status()


def transcript_requests(fake: FakeGong) -> Counter[str]:
    """How many transcript requests named each call."""
    return Counter(i for r in fake.requests_to("POST /v2/calls/transcript") for i in r.json()["filter"]["callIds"])


def test_a_pull_starts_every_call_whose_webhook_was_lost_and_none_twice(
    gong_tenant: str, fake_gong: FakeGong, drain
) -> None:
    keyword_list_set(tenant="acme", keywords=["no call says this"])  # engagement only: no LLM call, quicker
    client = Client()
    lost = fake_gong.calls[:: CALLS // LOST]
    for call in fake_gong.calls:
        if call not in lost:
            post_webhook(client, fake_gong, call)
    assert Instance.objects.filter(workflow="gong-ingest").count() == CALLS - LOST

    status = reconcile("reconcile-acme-1", drain)

    assert status["status"] == "complete", status["error"]
    assert status["output"]["metrics"] == {"gong_listed": CALLS, "gong_started": LOST}
    ingests = Instance.objects.filter(workflow="gong-ingest")
    assert set(ingests.values_list("id", flat=True)) == {f"gong-acme-{c.id}" for c in fake_gong.calls}
    assert set(ingests.values_list("status", flat=True)) == {"complete"}
    facts = Fact.objects.filter(tenant="acme", source_authority="GongEngagement")
    assert set(facts.values_list("source_ref", flat=True)) == {f"gong:call:{c.id}" for c in fake_gong.calls}
    started_by = dict(
        History.objects.filter(
            instance_id__in=[f"gong-acme-{c.id}" for c in lost], kind="instance.created"
        ).values_list("instance_id", "actor")
    )
    assert set(started_by.values()) == {"reconcile"} and len(started_by) == LOST
    # Each call's transcript was asked for once: by its webhook's instance, or in the pull's batch.
    assert set(transcript_requests(fake_gong).values()) == {1} and len(transcript_requests(fake_gong)) == CALLS
    cursor = ConnectionCursor.objects.get(connection__tenant="acme", connection__kind="gong")
    assert (cursor.listed, cursor.started, cursor.last_error) == (CALLS, LOST, "")
    assert cursor.cursor == cursor.window_end and cursor.window_end > fake_gong.calls[-1].started

    again = reconcile("reconcile-acme-2", drain)  # the lookback re-reads them all: nothing new starts
    assert again["output"]["metrics"] == {"gong_listed": CALLS, "gong_started": 0}
    assert Instance.objects.filter(workflow="gong-ingest").count() == CALLS
    assert set(transcript_requests(fake_gong).values()) == {1}


def test_a_failed_pull_keeps_its_cursor_shows_its_error_and_the_next_one_catches_up(
    gong_tenant: str, fake_gong: FakeGong, drain
) -> None:
    keyword_list_set(tenant="acme", keywords=["no call says this"])
    fake_gong.plan("GET /v2/calls", Planned(400, {"errors": ["fromDateTime is invalid"]}))

    failed = reconcile("reconcile-acme-1", drain)

    assert failed["status"] == "completed_with_errors"
    assert "fromDateTime is invalid" in failed["output"]["errors"][0]
    cursor = ConnectionCursor.objects.get(connection__tenant="acme")
    assert cursor.cursor is None and "GongRequestRejected" in cursor.last_error and cursor.holder == ""
    assert not Instance.objects.filter(workflow="gong-ingest").exists()

    recovered = reconcile("reconcile-acme-2", drain)
    assert recovered["output"]["metrics"]["gong_started"] == CALLS
    cursor.refresh_from_db()
    assert cursor.cursor is not None and cursor.last_error == "" and cursor.last_error_at is None


def test_a_connection_turned_off_for_pulls_is_not_read(gong_tenant: str, fake_gong: FakeGong, drain) -> None:
    connection_upsert(
        tenant="acme",
        kind="gong",
        base_url=fake_gong.url,
        key="gong-key",
        secret="gong-secret",
        options={"reconcile": False},
    )

    status = reconcile("reconcile-acme-1", drain)

    assert status["status"] == "complete" and fake_gong.count() == 0
    assert not ConnectionCursor.objects.exists()


OUTBOUND = """<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>
 <notifications xmlns="http://soap.sforce.com/2005/09/outbound">
  <OrganizationId>00D000000000062EAA</OrganizationId><ActionId>04k000000000008AAA</ActionId>
  <Notification><Id>04l000000000001AAA</Id>
   <sObject xsi:type="sf:Opportunity" xmlns:sf="urn:sobject.enterprise.soap.sforce.com">
    <sf:Id>{id}</sf:Id><sf:StageName>{stage}</sf:StageName><sf:LastModifiedDate>{modified}</sf:LastModifiedDate>
   </sObject></Notification>
 </notifications></soapenv:Body></soapenv:Envelope>"""


@pytest.fixture
def fake_salesforce() -> Iterator[FakeSalesforce]:
    now = datetime.now(UTC).replace(microsecond=0)
    changed = [
        dataclasses.replace(o, last_modified=now - timedelta(minutes=8 - i))
        for i, o in enumerate(demo_opportunities(count=5))
    ]
    old = dataclasses.replace(demo_opportunities(seed=8, count=1)[0], last_modified=now - timedelta(hours=3))
    with FakeSalesforce([*changed, old]) as server:
        yield server


def test_a_salesforce_pull_reads_changes_by_systemmodstamp_with_the_outbound_messages_ids(
    sfdc_tenant: str, fake_salesforce: FakeSalesforce, drain
) -> None:
    first = fake_salesforce.opportunities[0]
    modified = first.last_modified.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    ack = Client().post(
        "/hooks/salesforce/hook-sf-acme/outbound",
        OUTBOUND.format(id=first.id, stage=first.stage_name, modified=modified),
        content_type="text/xml",
    )
    assert ack.status_code == 200

    status = reconcile("reconcile-acme-1", drain)

    assert status["output"]["metrics"] == {"salesforce_listed": 5, "salesforce_started": 4}
    query = fake_salesforce.queries[-1]
    assert "WHERE SystemModstamp >= " in query and "ORDER BY SystemModstamp" in query
    ingests = Instance.objects.filter(workflow="salesforce-ingest")
    assert ingests.count() == 5 and set(ingests.values_list("status", flat=True)) == {"complete"}
    assert ingests.filter(id__startswith=f"sfdc-acme-Opportunity-{first.id}-v").count() == 1
    old = fake_salesforce.opportunities[-1]
    assert not ingests.filter(id__contains=old.id).exists()  # changed before the window: the webhooks' past
