"""Webhooks: Gong (key in the URL), Salesforce CDC (JSON) and Outbound Messages (SOAP, Ack)."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import include, path

from ingest.engine import get
from ingest.engine.models import Instance
from ingest.pipelines.services import connection_upsert
from tests.fakes import FakeGong
from tests.fakes.gong import extensive_json
from tests.sources.test_salesforce_events import CDC_MESSAGE, OUTBOUND

pytestmark = [pytest.mark.db, pytest.mark.django_db]

urlpatterns = [path("hooks/", include("ingest.urls"))]


@pytest.fixture(autouse=True)
def _urls(settings) -> None:
    settings.ROOT_URLCONF = __name__


@pytest.fixture
def client() -> Client:
    return Client(enforce_csrf_checks=True)


def test_the_gong_webhook_starts_an_ingest_and_acknowledges_a_redelivery(
    client: Client, gong_tenant: str, fake_gong: FakeGong, drain
) -> None:
    call = fake_gong.calls[0]
    body = json.dumps({"callData": extensive_json(call, fake_gong.url), "isTest": False})
    first = client.post("/hooks/gong/hook-acme-123", body, content_type="application/json")
    assert first.status_code == 202 and first.json()["instance_id"] == f"gong-acme-{call.id}"
    again = client.post("/hooks/gong/hook-acme-123", body, content_type="application/json")
    assert again.status_code == 200 and again.json()["status"] == "already processed"
    drain()
    assert get(f"gong-acme-{call.id}").status()["status"] == "complete"


def test_the_gong_webhook_refuses_unknown_keys_and_ignores_test_posts(
    client: Client, gong_tenant: str, fake_gong: FakeGong
) -> None:
    body = json.dumps({"callData": extensive_json(fake_gong.calls[0], fake_gong.url), "isTest": True})
    assert client.post("/hooks/gong/wrong", body, content_type="application/json").status_code == 404
    assert client.post("/hooks/gong/hook-acme-123", body, content_type="application/json").json()["status"] == "test"
    assert client.post("/hooks/gong/hook-acme-123", "{}", content_type="application/json").status_code == 400
    assert client.post("/hooks/gong/hook-acme-123", "not json", content_type="application/json").status_code == 400
    assert client.get("/hooks/gong/hook-acme-123").status_code == 405
    assert not Instance.objects.exists()


def test_a_change_data_capture_event_starts_one_ingest_per_record_versioned_by_commit(
    client: Client, sfdc_tenant: str
) -> None:
    deleted = json.loads(json.dumps(CDC_MESSAGE))
    deleted["data"]["payload"]["ChangeEventHeader"] |= {"changeType": "DELETE", "recordIds": ["006GONE"]}
    response = client.post(
        "/hooks/salesforce/hook-sf-acme/cdc", json.dumps([CDC_MESSAGE, deleted]), content_type="application/json"
    )
    assert response.status_code == 202
    assert response.json()["started"] == ["sfdc-acme-Opportunity-006RM000003bDwlYAE-v20250303120000000"]
    assert response.json()["skipped"] == 1
    again = client.post("/hooks/salesforce/hook-sf-acme/cdc", json.dumps(CDC_MESSAGE), content_type="application/json")
    assert again.json()["already_processed"] == response.json()["started"]
    assert client.post("/hooks/salesforce/nope/cdc", "{}", content_type="application/json").status_code == 404
    assert (
        client.post("/hooks/salesforce/hook-sf-acme/cdc", '{"x": 1}', content_type="application/json").status_code
        == 400
    )


def test_an_outbound_message_is_acked_in_soap_and_its_redelivery_starts_nothing(
    client: Client, sfdc_tenant: str
) -> None:
    response = client.post("/hooks/salesforce/hook-sf-acme/outbound", OUTBOUND, content_type="text/xml")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/xml")
    assert b"<Ack>true</Ack>" in response.content
    created = set(Instance.objects.values_list("id", flat=True))
    assert created and all(i.startswith("sfdc-acme-Opportunity-006") for i in created)
    client.post("/hooks/salesforce/hook-sf-acme/outbound", OUTBOUND, content_type="text/xml")
    assert set(Instance.objects.values_list("id", flat=True)) == created
    assert client.post("/hooks/salesforce/hook-sf-acme/outbound", "<x/>", content_type="text/xml").status_code == 400


def test_an_outbound_message_from_another_org_is_refused(client: Client, sfdc_tenant: str) -> None:
    connection_upsert(
        tenant="acme", kind="salesforce", webhook_key="hook-sf-acme", options={"organization_id": "00DOTHER"}
    )
    response = client.post("/hooks/salesforce/hook-sf-acme/outbound", OUTBOUND, content_type="text/xml")
    assert response.status_code == 404 and not Instance.objects.exists()


@pytest.mark.django_db(transaction=True)  # as in production: no transaction around the request
def test_a_gong_post_is_parsed_once_and_a_redelivery_writes_nothing_in_one_statement(
    client: Client, gong_tenant: str, fake_gong: FakeGong, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from ingest.engine.models import History
    from ingest.triggers import limits

    parses = []
    real_parse = limits.json_parse
    monkeypatch.setattr(limits, "json_parse", lambda *a, **k: parses.append(1) or real_parse(*a, **k))
    body = json.dumps({"callData": extensive_json(fake_gong.calls[0], fake_gong.url), "isTest": False})
    first = client.post("/hooks/gong/hook-acme-123", body, content_type="application/json")
    assert first.status_code == 202 and len(parses) == 1  # the input guard's parse, used by the view
    from dashboard.observability.ingress import counts

    monkeypatch.setattr(counts, "due", lambda: False)  # the ingress counters' flush is not the request's
    with CaptureQueriesContext(connection) as queries:
        again = client.post("/hooks/gong/hook-acme-123", body, content_type="application/json")
    assert again.status_code == 200 and again.json()["status"] == "already processed"
    if connection.vendor == "postgresql":  # the create that inserts nothing, under the kept connection's guard
        assert len(queries.captured_queries) == 1, [q["sql"] for q in queries.captured_queries]
    assert Instance.objects.count() == 1
    assert History.objects.filter(kind="instance.created").count() == 1


def test_a_post_whose_kept_connection_changed_is_handled_again_from_the_body_parsed_once(
    client: Client, gong_tenant: str, fake_gong: FakeGong, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process keeps a webhook's connection between posts; when another process changed the
    row, the post is handled again from a fresh lookup, and reads the body it already parsed."""
    from ingest.pipelines.models import Connection
    from ingest.triggers import limits

    kept = json.dumps({"callData": extensive_json(fake_gong.calls[0], fake_gong.url), "isTest": False})
    assert client.post("/hooks/gong/hook-acme-123", kept, content_type="application/json").status_code == 202
    Connection.objects.filter(kind="gong").update(options={"edited": "elsewhere"})  # the kept guard no longer holds
    parses = []
    real_parse = limits.json_parse
    monkeypatch.setattr(limits, "json_parse", lambda *a, **k: parses.append(1) or real_parse(*a, **k))
    body = json.dumps({"callData": extensive_json(fake_gong.calls[1], fake_gong.url), "isTest": False})
    second = client.post("/hooks/gong/hook-acme-123", body, content_type="application/json")
    assert second.status_code == 202, second.content
    assert len(parses) == 1
    assert Instance.objects.count() == 2


def test_a_disabled_connection_stops_its_webhook_at_once(client: Client, gong_tenant: str, fake_gong: FakeGong) -> None:
    from ingest.pipelines.models import Connection

    body = json.dumps({"callData": extensive_json(fake_gong.calls[0], fake_gong.url), "isTest": True})
    assert client.post("/hooks/gong/hook-acme-123", body, content_type="application/json").status_code == 200
    Connection.objects.filter(kind="gong").update(enabled=False)
    assert client.post("/hooks/gong/hook-acme-123", body, content_type="application/json").status_code == 404
