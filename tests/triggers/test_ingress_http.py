"""Signed HTTP ingress over Django's test client: every refusal and the idempotency contract."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from ingest.engine.models import Instance
from ingest.triggers.models import IdempotencyKey, Route
from ingest.triggers.services import ingress_secret_create, route_upsert
from tests.triggers.support import signed_post, worker_thread

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def error(response: Any) -> dict[str, str]:
    body = response.json()
    assert set(body) == {"error"} and {"code", "message"} <= set(body["error"])
    return body["error"]


def test_a_signed_request_starts_the_workflow_async(client: Client, route: Route, acme_creds: dict[str, str]) -> None:
    response = signed_post(client, "orders", {"order": 7}, **acme_creds)
    assert response.status_code == 202
    body = response.json()
    assert body["status_url"] == f"/api/instances/{body['instance_id']}"
    assert response["Location"] == body["status_url"]
    instance = Instance.objects.get(pk=body["instance_id"])
    assert (instance.workflow, instance.tenant, instance.params) == ("test-echo", "acme", {"order": 7})


def test_a_missing_token_is_401(client: Client, route: Route, acme_creds: dict[str, str]) -> None:
    response = signed_post(client, "orders", {}, token=None, secret=acme_creds["secret"])
    assert response.status_code == 401 and error(response)["code"] == "not_authenticated"
    assert Instance.objects.count() == 0


def test_another_tenants_token_is_401(client: Client, route: Route) -> None:
    _, token, secret = ingress_secret_create(tenant="globex")
    response = signed_post(client, "orders", {}, token=token, secret=secret)
    assert response.status_code == 401 and error(response)["code"] == "not_authenticated"


def test_a_wrong_signature_is_401(client: Client, route: Route, acme_creds: dict[str, str]) -> None:
    response = signed_post(client, "orders", {"a": 1}, token=acme_creds["token"], secret="other")
    assert response.status_code == 401 and error(response)["code"] == "bad_signature"
    response = signed_post(client, "orders", {"a": 1}, **acme_creds, signature="sha256=00")
    assert response.status_code == 401
    assert Instance.objects.count() == 0


@pytest.mark.parametrize("skew", [-400, 400])
def test_a_timestamp_outside_the_window_is_401(
    client: Client, route: Route, acme_creds: dict[str, str], skew: int
) -> None:
    ts = int(timezone.now().timestamp()) + skew
    response = signed_post(client, "orders", {}, **acme_creds, ts=ts)
    assert response.status_code == 401 and error(response)["code"] == "stale_timestamp"
    assert Instance.objects.count() == 0


def test_a_timestamp_inside_the_window_passes(client: Client, route: Route, acme_creds: dict[str, str]) -> None:
    ts = int(timezone.now().timestamp()) - 290
    assert signed_post(client, "orders", {}, **acme_creds, ts=ts).status_code == 202


def test_unknown_route_is_404_and_disabled_route_is_409(
    client: Client, route: Route, acme_creds: dict[str, str]
) -> None:
    assert error(signed_post(client, "nope", {}, **acme_creds))["code"] == "route_not_found"
    route_upsert(name="orders", workflow="test-echo", tenant="acme", enabled=False)
    response = signed_post(client, "orders", {}, **acme_creds)
    assert response.status_code == 409 and error(response)["code"] == "route_disabled"
    assert Instance.objects.count() == 0


def test_a_body_over_one_mib_is_413(client: Client, route: Route, acme_creds: dict[str, str]) -> None:
    big = b'{"x": "' + b"a" * (1024 * 1024) + b'"}'
    response = signed_post(client, "orders", big, **acme_creds)
    assert response.status_code == 413 and error(response)["code"] == "body_too_large"
    assert Instance.objects.count() == 0


def test_malformed_json_is_400_with_the_parse_error(client: Client, route: Route, acme_creds: dict[str, str]) -> None:
    response = signed_post(client, "orders", b'{"a": 1,,}', **acme_creds)
    assert response.status_code == 400
    err = error(response)
    assert err["code"] == "malformed_json" and "line 1 column 9" in err["message"]
    assert Instance.objects.count() == 0


def test_a_json_array_is_400(client: Client, route: Route, acme_creds: dict[str, str]) -> None:
    response = signed_post(client, "orders", b"[1, 2]", **acme_creds)
    assert response.status_code == 400 and error(response)["code"] == "invalid_payload"


def test_a_bad_wait_is_400_and_creates_nothing(client: Client, route: Route, acme_creds: dict[str, str]) -> None:
    response = signed_post(client, "orders", {}, **acme_creds, wait="soon")
    assert response.status_code == 400 and error(response)["code"] == "invalid_wait"
    assert Instance.objects.count() == 0


def test_get_is_405_json(client: Client, route: Route) -> None:
    response = client.get("/api/routes/orders")
    assert response.status_code == 405 and error(response)["code"] == "method_not_allowed"


def test_the_same_key_and_body_returns_the_same_instance(
    client: Client, route: Route, acme_creds: dict[str, str]
) -> None:
    first = signed_post(client, "orders", {"a": 1}, **acme_creds, key="k-1")
    again = signed_post(client, "orders", {"a": 1}, **acme_creds, key="k-1")
    assert (first.status_code, again.status_code) == (202, 200)
    assert first.json()["instance_id"] == again.json()["instance_id"]
    assert again.json()["created"] is False
    assert Instance.objects.count() == 1


def test_the_same_key_with_another_body_is_409(client: Client, route: Route, acme_creds: dict[str, str]) -> None:
    signed_post(client, "orders", {"a": 1}, **acme_creds, key="k-2")
    response = signed_post(client, "orders", {"a": 2}, **acme_creds, key="k-2")
    assert response.status_code == 409 and error(response)["code"] == "idempotency_conflict"
    assert Instance.objects.count() == 1


def test_an_expired_key_starts_a_new_instance(client: Client, route: Route, acme_creds: dict[str, str]) -> None:
    first = signed_post(client, "orders", {"a": 1}, **acme_creds, key="k-3").json()
    IdempotencyKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    second = signed_post(client, "orders", {"a": 1}, **acme_creds, key="k-3")
    assert second.status_code == 202 and second.json()["instance_id"] != first["instance_id"]
    assert Instance.objects.count() == 2


def test_keys_live_for_the_route_ttl(client: Client, acme_creds: dict[str, str]) -> None:
    route_upsert(name="short", workflow="test-echo", tenant="acme", idempotency_ttl_seconds=60)
    signed_post(client, "short", {}, **acme_creds, key="k-4")
    key = IdempotencyKey.objects.get()
    assert key.expires_at - key.created_at == timedelta(seconds=60)


def test_the_route_rate_limit_is_429_with_retry_after(client: Client, acme_creds: dict[str, str]) -> None:
    route_upsert(name="limited", workflow="test-echo", tenant="acme", rate_limit_per_minute=2)
    # Distinct bodies: the same signed bytes twice would be a replay (409), not a new request.
    codes = [signed_post(client, "limited", {"n": n}, **acme_creds).status_code for n in range(3)]
    assert codes == [202, 202, 429]
    refused = signed_post(client, "limited", {"n": 3}, **acme_creds)
    assert error(refused)["code"] == "rate_limited" and int(refused["Retry-After"]) >= 1
    assert Instance.objects.count() == 2


def test_the_tenant_rate_limit_spans_its_routes(client: Client) -> None:
    _, token, secret = ingress_secret_create(tenant="acme", rate_limit_per_minute=1)
    route_upsert(name="r1", workflow="test-echo", tenant="acme")
    route_upsert(name="r2", workflow="test-echo", tenant="acme")
    assert signed_post(client, "r1", {}, token=token, secret=secret).status_code == 202
    assert signed_post(client, "r2", {}, token=token, secret=secret).status_code == 429


def test_sync_wait_returns_the_output(
    client: Client, route: Route, acme_creds: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ingest.engine.worker.turns import run_until_idle

    # The waiter polls the ledger; between polls the worker runs (here: in the same thread).
    monkeypatch.setattr("ingest.triggers.selectors._sleep", lambda seconds: run_until_idle())
    response = signed_post(client, "orders", {"n": 3}, **acme_creds, wait="10s")
    assert response.status_code == 200
    assert response.json()["status"] == "complete"
    assert response.json()["output"] == {"got": {"n": 3}}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_sync_wait_returns_the_output_of_a_worker_thread(
    route: Route, acme_creds: dict[str, str], require_postgres: None
) -> None:
    with worker_thread():
        response = signed_post(Client(), "orders", {"n": 3}, **acme_creds, wait="10s")
    assert response.status_code == 200
    assert response.json()["status"] == "complete"
    assert response.json()["output"] == {"got": {"n": 3}}


def test_sync_wait_answers_202_when_not_finished_in_time(client: Client, acme_creds: dict[str, str]) -> None:
    route_upsert(name="slow", workflow="test-sleeper", tenant="acme", sync_default=True, wait_seconds=0.3)
    response = signed_post(client, "slow", {}, **acme_creds)
    assert response.status_code == 202 and response.json()["status"] != "complete"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicates_create_exactly_one_instance(
    route: Route, acme_creds: dict[str, str], require_postgres: None
) -> None:
    # Real concurrency needs PostgreSQL: SQLite's shared in-memory test database locks tables.
    barrier, results, lock = threading.Barrier(8), [], threading.Lock()

    def send() -> None:
        try:
            barrier.wait()
            response = signed_post(Client(), "orders", {"a": 1}, **acme_creds, key="race")
            with lock:
                results.append((response.status_code, response.json()["instance_id"]))
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 8
    assert sorted(code for code, _ in results) == [200] * 7 + [202]
    assert len({iid for _, iid in results}) == 1
    assert Instance.objects.count() == 1 and IdempotencyKey.objects.count() == 1


def test_the_body_is_passed_through_unchanged(client: Client, route: Route, acme_creds: dict[str, str]) -> None:
    payload = {"nested": {"list": [1, 2.5, None, "é"]}, "flag": True}
    response = signed_post(client, "orders", json.dumps(payload).encode(), **acme_creds)
    assert Instance.objects.get(pk=response.json()["instance_id"]).params == payload
