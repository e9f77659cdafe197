"""Webhooks given malformed but well-typed data answer a 4xx in the JSON envelope, start
nothing, and answer fast (a huge recordIds list is refused before any work)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.test import Client

from ingest.engine.models import Instance
from ingest.pipelines.services import connection_upsert
from ingest.workflows import hooks as hooks_module
from tests.fuzzing import ledger_counts
from tests.sources.test_salesforce_events import CDC_MESSAGE, OUTBOUND

pytestmark = [pytest.mark.db, pytest.mark.django_db]

GONG = "/hooks/gong/hook-g"
CDC = "/hooks/salesforce/hook-s/cdc"
OUT = "/hooks/salesforce/hook-s/outbound"
CALL = {
    "metaData": {
        "id": "7782342274025937895",
        "title": "Acme <> Us: Demo",
        "started": "2025-03-03T15:00:00-08:00",
        "duration": 1800,
    },
    "parties": [{"id": "p1", "name": "Ann", "speakerId": "1"}],
    "content": {},
    "context": [],
}


@pytest.fixture
def hooks(db: Any) -> Client:
    connection_upsert(
        tenant="acme", kind="gong", base_url="http://127.0.0.1:9", key="k", secret="s", webhook_key="hook-g"
    )
    connection_upsert(
        tenant="acme", kind="salesforce", base_url="http://127.0.0.1:9", key="k", secret="s", webhook_key="hook-s"
    )
    return Client()


def refused(
    client: Client, path: str, body: Any, status: int = 400, *, content_type: str = "application/json"
) -> dict[str, str]:
    raw = body if isinstance(body, bytes | str) else json.dumps(body)
    before = ledger_counts()
    response = client.post(path, raw, content_type=content_type)
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    assert ledger_counts() == before
    error: dict[str, str] = response.json()["error"]
    assert error["code"] and error["message"]
    return error


def with_meta(**changes: Any) -> dict[str, Any]:
    call = copy.deepcopy(CALL)
    call["metaData"].update(changes)
    return {"callData": call, "isTest": False}


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (with_meta(started="not a date"), "not in the shape"),
        (with_meta(started=12), "not in the shape"),
        (with_meta(duration="an hour"), "not in the shape"),
        (with_meta(id="x" * 500), "is not a call id"),
        (with_meta(id=["1"]), "is not a call id"),
        ({"callData": {**CALL, "parties": [1, 2]}}, "not in the shape"),
        ({"callData": {**CALL, "context": 5}}, "not in the shape"),
        ({"callData": {**CALL, "content": [1]}}, "not in the shape"),
        ({"callData": []}, "no 'callData' object"),
    ],
)
def test_malformed_gong_call_data_is_a_400_that_starts_nothing(hooks: Client, body: Any, says: str) -> None:
    error = refused(hooks, GONG, body)
    assert error["code"] == "invalid_webhook" and says in error["message"]


def test_a_well_formed_gong_call_still_starts_its_ingest(hooks: Client) -> None:
    response = hooks.post(GONG, json.dumps({"callData": CALL, "isTest": False}), content_type="application/json")
    assert response.status_code == 202 and Instance.objects.count() == 1


def cdc(**header: Any) -> dict[str, Any]:
    message = copy.deepcopy(CDC_MESSAGE)
    message["data"]["payload"]["ChangeEventHeader"].update(header)
    return message


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (cdc(commitTimestamp=10**30), "OverflowError"),
        (cdc(commitTimestamp=1e300), "OverflowError"),
        (cdc(commitTimestamp="soon"), "ValueError"),
        (cdc(recordIds="006RM000003bDwlYAE"), "is a str"),
        (cdc(recordIds=[{"id": 1}]), "not a Salesforce id"),
        (cdc(recordIds=["x" * 40]), "not a Salesforce id"),
        (cdc(recordIds=["006RM000003bDwl"] * 201), "201 recordIds"),
        ({"data": {"payload": 5}}, "must be JSON objects"),
        ({"data": "x"}, "must be JSON objects"),
        ({"data": {"payload": CDC_MESSAGE["data"]["payload"], "event": {"replayId": "x"}}}, "replayId"),
    ],
)
def test_malformed_change_data_capture_headers_are_a_400(hooks: Client, body: Any, says: str) -> None:
    assert says in refused(hooks, CDC, body)["message"]


def test_a_post_naming_too_many_records_is_refused_before_any_work(hooks: Client, monkeypatch: Any) -> None:
    starts: list[object] = []
    monkeypatch.setattr(hooks_module, "salesforce_ingest_start", lambda *a, **k: starts.append(k))
    events = [cdc(recordIds=[f"006RM{i:013d}"[:18] for i in range(n, n + 150)]) for n in range(0, 1500, 150)]
    error = refused(hooks, CDC, events, 413)
    assert error["code"] == "too_many_records" and "1,500 records" in error["message"]
    assert starts == []  # not one record was started (and rolled back) before the refusal


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (OUTBOUND.replace("<sf:Id>006000000000001AAA</sf:Id>", ""), "is not a Salesforce id"),
        (OUTBOUND.replace("006000000000001AAA", "006 0000 ; DROP"), "is not a Salesforce id"),
        (
            OUTBOUND.replace(
                "<sf:Amount>", "<sf:LastModifiedDate>9999-12-31T23:59:59-01:00</sf:LastModifiedDate><sf:Amount>"
            ),
            "LastModifiedDate",
        ),
        (
            OUTBOUND.replace("<sf:Amount>", "<sf:LastModifiedDate>yesterday</sf:LastModifiedDate><sf:Amount>"),
            "LastModifiedDate",
        ),
        (OUTBOUND.encode("utf-16"), "not UTF-8"),
        (b"\xff\xfe<x/>", "not UTF-8"),
    ],
)
def test_malformed_outbound_message_fields_are_a_400_in_json(hooks: Client, body: Any, says: str) -> None:
    error = refused(hooks, OUT, body, content_type="text/xml")
    assert error["code"] == "invalid_webhook" and says in error["message"]


def test_an_outbound_message_with_too_many_notifications_is_refused(hooks: Client) -> None:
    start = OUTBOUND.index("<Notification>")
    one = OUTBOUND[start : OUTBOUND.index("</Notification>") + len("</Notification>")]
    body = OUTBOUND[:start] + one * 101 + OUTBOUND[OUTBOUND.index("</notifications>") :]
    assert "101 notifications" in refused(hooks, OUT, body, content_type="text/xml")["message"]


@pytest.mark.parametrize(
    ("path", "body", "content_type", "status", "code"),
    [
        (GONG, json.dumps({"callData": CALL}), "text/plain", 415, "unsupported_media_type"),
        (CDC, json.dumps(CDC_MESSAGE), "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
        (OUT, OUTBOUND, "application/json", 415, "unsupported_media_type"),
        (GONG, '{"callData": {"metaData": {"id": "1", "title": "\\u0000"}}}', "application/json", 400, "nul_character"),
        (CDC, "[" * 10_000 + "]" * 10_000, "application/json", 400, "too_deep"),
        ("/hooks/gong/unknown-key", "{}", "application/json", 404, "webhook_not_found"),
        ("/hooks/gong/hook%00g", "{}", "application/json", 400, "nul_character"),
    ],
)
def test_every_hook_error_is_the_json_envelope(
    hooks: Client, path: str, body: str, content_type: str, status: int, code: str
) -> None:
    assert refused(hooks, path, body, status, content_type=content_type)["code"] == code


def test_a_get_on_a_hook_is_a_405_in_the_envelope(hooks: Client) -> None:
    response = hooks.get(GONG)
    assert response.status_code == 405 and response.json()["error"]["code"] == "method_not_allowed"
    assert response["Allow"] == "POST"
