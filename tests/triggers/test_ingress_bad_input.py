"""Signed ingress: malformed input is a clear 4xx that starts nothing, and a signed request
replayed byte for byte starts no second instance."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from ingest.engine.models import Instance
from ingest.triggers import signing
from ingest.triggers.models import Route, SeenSignature
from ingest.triggers.services import idempotency_keys_purge
from tests.fuzzing import ledger_counts, nested
from tests.triggers.support import signed_post

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content[:300]
    error: dict[str, Any] = response.json()["error"]
    return error


def test_a_timestamp_of_hundreds_of_digits_is_a_401_not_an_overflow(
    client: Client, route: Route, acme_creds: dict[str, str]
) -> None:
    stamp = "9" * 400
    headers = {
        "Authorization": f"Bearer {acme_creds['token']}",
        "X-Runledger-Timestamp": stamp,
        "X-Runledger-Signature": signing.sign(secret=acme_creds["secret"], timestamp=stamp, body=b"{}"),
    }
    response = client.post("/api/routes/orders", data=b"{}", content_type="application/json", headers=headers)
    error = error_of(response, 401)
    assert error["code"] == "stale_timestamp" and "1 to 12 digits" in error["message"]
    assert not Instance.objects.exists()


def test_a_replayed_signed_request_starts_no_second_instance(
    client: Client, route: Route, acme_creds: dict[str, str]
) -> None:
    stamp = int(timezone.now().timestamp())
    first = signed_post(client, "orders", {"n": 1}, token=acme_creds["token"], secret=acme_creds["secret"], ts=stamp)
    assert first.status_code == 202
    before = ledger_counts()
    again = signed_post(client, "orders", {"n": 1}, token=acme_creds["token"], secret=acme_creds["secret"], ts=stamp)
    error = error_of(again, 409)
    assert error["code"] == "replayed_request"
    assert error["instance_id"] == first.json()["instance_id"]
    assert "Idempotency-Key" in error["message"]
    assert ledger_counts() == before
    assert Instance.objects.count() == 1
    # Another route of the same tenant is no way around it: the signature covers no route name.
    Route.objects.create(name="other", workflow="test-echo", tenant="acme")
    elsewhere = signed_post(client, "other", {"n": 1}, token=acme_creds["token"], secret=acme_creds["secret"], ts=stamp)
    assert error_of(elsewhere, 409)["code"] == "replayed_request"
    # A new signature (new timestamp) is a new request.
    fresh = signed_post(
        client, "orders", {"n": 1}, token=acme_creds["token"], secret=acme_creds["secret"], ts=stamp + 1
    )
    assert fresh.status_code == 202 and Instance.objects.count() == 2


def test_with_an_idempotency_key_a_replay_gets_the_original_answer(
    client: Client, route: Route, acme_creds: dict[str, str]
) -> None:
    stamp = int(timezone.now().timestamp())
    args: dict[str, Any] = {"token": acme_creds["token"], "secret": acme_creds["secret"], "ts": stamp, "key": "k-1"}
    first = signed_post(client, "orders", {"n": 1}, **args)
    again = signed_post(client, "orders", {"n": 1}, **args)
    assert again.status_code == 200 and again.json()["created"] is False
    assert again.json()["instance_id"] == first.json()["instance_id"]


def test_remembered_signatures_expire_with_their_window(
    client: Client, route: Route, acme_creds: dict[str, str]
) -> None:
    signed_post(client, "orders", {"n": 1}, token=acme_creds["token"], secret=acme_creds["secret"])
    seen = SeenSignature.objects.get()
    assert seen.route == "orders" and seen.tenant == "acme"
    assert idempotency_keys_purge(now=seen.expires_at - timedelta(seconds=1)) == 0
    assert idempotency_keys_purge(now=seen.expires_at) == 1
    assert not SeenSignature.objects.exists()


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        (b'{"a": "\\u0000"}', "application/json", 400, "nul_character"),
        (b'{"a": "\\u0000"}', "text/plain", 415, "unsupported_media_type"),
        (b'{"a": "\\ud800"}', "application/json", 400, "invalid_unicode"),
        (b'{"a": ' + b"9" * 5000 + b"}", "application/json", 400, "number_too_long"),
        (b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "application/json", 400, "too_deep"),
        (b'{"_schedule": {"manual": true}}', "application/json", 400, "reserved_param"),
        (b'{"_event": {"id": "forged"}}', "application/json", 400, "reserved_param"),
        (b"{" + b'"a": 1,' * 200_000 + b'"b": 1}', "application/json", 413, "body_too_large"),
    ],
)
def test_hostile_bodies_are_refused_with_what_was_wrong(
    client: Client, route: Route, acme_creds: dict[str, str], body: bytes, content_type: str, status: int, code: str
) -> None:
    stamp = str(int(timezone.now().timestamp()))
    headers = {
        "Authorization": f"Bearer {acme_creds['token']}",
        "X-Runledger-Timestamp": stamp,
        "X-Runledger-Signature": signing.sign(secret=acme_creds["secret"], timestamp=stamp, body=body),
    }
    before = ledger_counts()
    response = client.post("/api/routes/orders", data=body, content_type=content_type, headers=headers)
    assert error_of(response, status)["code"] == code
    assert ledger_counts() == before


def test_the_service_itself_applies_the_limits_without_the_middleware(route: Route, acme_creds: dict[str, str]) -> None:
    from ingest.triggers.errors import NestedTooDeeply
    from ingest.triggers.services import route_trigger

    body = json.dumps({"a": nested(40)}).encode()
    stamp = str(int(timezone.now().timestamp()))
    with pytest.raises(NestedTooDeeply):
        route_trigger(
            route="orders",
            token=acme_creds["token"],
            timestamp=stamp,
            signature=signing.sign(secret=acme_creds["secret"], timestamp=stamp, body=body),
            body=body,
            idempotency_key=None,
            now=timezone.now(),
        )
    assert not Instance.objects.exists()
