"""A webhook's connection kept per process (PostgreSQL): a post whose connection the process has
seen takes one statement, the create under a guard that the row is unchanged; a connection
disabled, re-keyed, moved or deleted by anyone is refused at the very next post, and an answer no
guarded statement confirmed (a test post, a refused body) is given from a fresh lookup."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import include, path
from django.utils import timezone

from ingest.engine.models import History, Instance
from ingest.pipelines.models import Connection
from ingest.pipelines.services import connection_token_store, connection_upsert
from tests.fakes import FakeGong
from tests.fakes.gong import extensive_json
from tests.sources.test_salesforce_events import CDC_MESSAGE

pytestmark = [pytest.mark.db, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

urlpatterns = [path("hooks/", include("ingest.urls"))]
GONG = "/hooks/gong/hook-acme-123"
CDC = "/hooks/salesforce/hook-sf-acme/cdc"


@pytest.fixture(autouse=True)
def _urls(settings, require_postgres) -> None:
    settings.ROOT_URLCONF = __name__


@pytest.fixture(autouse=True)
def _no_counter_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboard.observability.ingress import counts

    monkeypatch.setattr(counts, "due", lambda: False)  # the ingress counters' flush is not the post's


def _gong_post(client: Client, fake_gong: FakeGong, n: int, *, test: bool = False) -> Any:
    body = json.dumps({"callData": extensive_json(fake_gong.calls[n], fake_gong.url), "isTest": test})
    return client.post(GONG, body, content_type="application/json")


def _cdc_post(client: Client, record: str) -> Any:
    message = copy.deepcopy(CDC_MESSAGE)
    message["data"]["payload"]["ChangeEventHeader"]["recordIds"] = [record]
    return client.post(CDC, json.dumps(message), content_type="application/json")


def _statements(post: Callable[[], Any]) -> tuple[Any, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        response = post()
    return response, [q["sql"] for q in queries.captured_queries]


def test_a_gong_post_of_a_known_connection_starts_its_ingest_in_one_statement(
    client: Client, gong_tenant: str, fake_gong: FakeGong
) -> None:
    first, _ = _statements(lambda: _gong_post(client, fake_gong, 0))
    second, statements = _statements(lambda: _gong_post(client, fake_gong, 1))
    assert first.status_code == 202 and second.status_code == 202
    assert len(statements) == 1 and "engine_instance" in statements[0], statements
    assert Instance.objects.filter(tenant=gong_tenant).count() == 2
    assert History.objects.filter(kind="instance.created").count() == 2


def test_a_cdc_post_of_a_known_connection_starts_its_ingest_in_one_statement(client: Client, sfdc_tenant: str) -> None:
    assert _cdc_post(client, "006A").status_code == 202
    second, statements = _statements(lambda: _cdc_post(client, "006B"))
    assert second.status_code == 202 and len(statements) == 1, statements
    assert Instance.objects.filter(tenant=sfdc_tenant).count() == 2


def _disable(kind: str) -> None:
    Connection.objects.filter(kind=kind).update(enabled=False)


def _rekey(kind: str) -> None:
    row = Connection.objects.get(kind=kind)
    connection_upsert(tenant=row.tenant, kind=kind, webhook_key="a-new-key")


def _move(kind: str) -> None:
    Connection.objects.filter(kind=kind).update(tenant="globex")


def _delete(kind: str) -> None:
    Connection.objects.filter(kind=kind).delete()


CHANGES = pytest.mark.parametrize(
    "change", [_disable, _rekey, _move, _delete], ids=["disabled", "re-keyed", "moved-to-another-tenant", "deleted"]
)


@CHANGES
def test_a_changed_gong_connection_refuses_or_follows_the_next_post_at_once(
    client: Client, gong_tenant: str, fake_gong: FakeGong, change: Any
) -> None:
    assert _gong_post(client, fake_gong, 0).status_code == 202
    change("gong")
    after = _gong_post(client, fake_gong, 1)
    redelivery = _gong_post(client, fake_gong, 0)
    if change is _move:  # the key now names globex's connection: the post starts globex's ingest
        assert after.status_code == 202 and after.json()["instance_id"].startswith("gong-globex-")
        assert redelivery.status_code == 202 and redelivery.json()["instance_id"].startswith("gong-globex-")
        assert Instance.objects.filter(tenant=gong_tenant).count() == 1
        return
    for refused in (after, redelivery):
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "webhook_not_found"
    assert Instance.objects.count() == 1


@CHANGES
def test_a_changed_salesforce_connection_refuses_or_follows_the_next_post_at_once(
    client: Client, sfdc_tenant: str, change: Any
) -> None:
    assert _cdc_post(client, "006A").status_code == 202
    change("salesforce")
    after, redelivery = _cdc_post(client, "006B"), _cdc_post(client, "006A")
    if change is _move:
        assert after.status_code == 202 and after.json()["started"][0].startswith("sfdc-globex-")
        assert redelivery.json()["started"][0].startswith("sfdc-globex-")  # not "already processed" for acme
        return
    for refused in (after, redelivery):
        assert refused.status_code == 404, refused.content
    assert Instance.objects.count() == 1


def test_a_test_post_or_a_refused_body_on_a_disabled_connection_answers_404_not_what_it_was(
    client: Client, gong_tenant: str, fake_gong: FakeGong
) -> None:
    # Neither answer creates anything, so no guard confirms the kept connection: the process
    # asks again, and a revoked key learns nothing beyond "not found".
    assert _gong_post(client, fake_gong, 0).status_code == 202
    _disable("gong")
    assert _gong_post(client, fake_gong, 1, test=True).status_code == 404
    assert client.post(GONG, "[1]", content_type="application/json").status_code == 404
    assert (
        client.post(CDC.replace("hook-sf-acme", "hook-acme-123"), "{}", content_type="application/json").status_code
        == 404
    )


def test_a_stored_access_token_keeps_the_connection_and_its_one_statement(client: Client, sfdc_tenant: str) -> None:
    # A worker keeping a refreshed OAuth token writes the row, but not what a webhook reads.
    assert _cdc_post(client, "006A").status_code == 202
    connection_token_store(
        tenant=sfdc_tenant,
        kind="salesforce",
        access_token="tok",
        instance_url="https://x.example",
        expires_at=timezone.now(),
    )
    second, statements = _statements(lambda: _cdc_post(client, "006B"))
    assert second.status_code == 202 and len(statements) == 1, statements


def test_an_edited_organization_id_applies_to_the_next_outbound_message(client: Client, sfdc_tenant: str) -> None:
    from tests.sources.test_salesforce_events import OUTBOUND

    outbound = CDC.replace("/cdc", "/outbound")
    assert client.post(outbound, OUTBOUND, content_type="text/xml").status_code == 200
    Connection.objects.filter(kind="salesforce").update(options={"organization_id": "00DOTHER"})
    count = Instance.objects.count()
    assert client.post(outbound, OUTBOUND.replace("006", "007"), content_type="text/xml").status_code == 404
    assert Instance.objects.count() == count
