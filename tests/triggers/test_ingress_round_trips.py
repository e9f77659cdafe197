"""Signed ingress in few statements: the route and the credential in one lookup, the key, the
instance and its history in one statement on PostgreSQL (one transaction on SQLite), no read-back
of what the request just wrote; a replay reads its key and the instance's outcome in that statement."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from ingest.engine.models import History, Instance
from ingest.triggers.models import IdempotencyKey, IngressSecret, Route
from ingest.triggers.sql import route_with_secret
from tests.triggers.support import signed_post

pytestmark = [pytest.mark.db, pytest.mark.django_db]


@pytest.mark.django_db(transaction=True)  # as in production: no transaction around the request
def test_a_keyed_request_starts_its_instance_in_one_statement_once_its_route_is_known(
    client: Client, route: Route, acme_creds: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dashboard.observability.ingress import counts

    monkeypatch.setattr(counts, "due", lambda: False)  # the ingress counters' flush is not the request's
    # PostgreSQL: the lookup, then key + instance + history + the route's callback URL in one
    # statement: 2 (it was 12, then 7, then 3); the next request of the process skips the lookup.
    # SQLite: lookup, BEGIN, key, instance, history, COMMIT, the route's callback, every time: 7.
    counted = []
    for n in (1, 2):
        with CaptureQueriesContext(connection) as queries:
            response = signed_post(client, "orders", {"order": n}, **acme_creds, key=f"k-{n}")
        counted.append([q["sql"] for q in queries.captured_queries])
        assert response.status_code == 202
        body = response.json()
        assert body["status"] == "queued" and body["created"] is True
        instance = Instance.objects.get(pk=body["instance_id"])
        assert instance.status == "queued"
        assert IdempotencyKey.objects.get(key=f"k-{n}").instance_id == instance.id
        assert History.objects.filter(instance_id=instance.id, kind="instance.created").count() == 1
    if connection.vendor == "postgresql":
        assert [len(statements) for statements in counted] == [2, 1], counted
        assert all(
            table in counted[1][0]
            for table in ("triggers_idempotencykey", "engine_instance", "engine_history", "alerts_routecallback")
        )
    else:
        assert [len(statements) for statements in counted] == [7, 7], counted


def _rotate(route: Route) -> None:
    from django.utils import timezone

    from ingest.triggers.services import ingress_secret_rotate

    ingress_secret_rotate(tenant="acme", name="default", now=timezone.now(), overlap_seconds=0, reason="test")


def _new_hmac_secret_only(route: Route) -> None:
    secret = IngressSecret.objects.get(tenant="acme")
    secret.hmac_secret = "rls_another"
    secret.save()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "change",
    [
        _rotate,
        _new_hmac_secret_only,
        lambda route: IngressSecret.objects.update(enabled=False),
        lambda route: IngressSecret.objects.all().delete(),
        lambda route: Route.objects.update(enabled=False),
        lambda route: Route.objects.all().delete(),
        lambda route: Route.objects.update(tenant="globex"),  # the credential is acme's, not globex's
    ],
    ids=[
        "rotated",
        "hmac-secret-replaced",
        "credential-disabled",
        "credential-deleted",
        "route-disabled",
        "route-deleted",
        "route-moved-to-another-tenant",
    ],
)
def test_a_change_to_the_route_or_credential_refuses_the_next_request_of_the_same_process_at_once(
    client: Client, route: Route, acme_creds: dict[str, str], change: Any
) -> None:
    # The first request leaves its route and credential with the process; the change is made
    # behind its back (as another process or the admin would), and the next request, with the
    # same token, is refused and writes nothing.
    from ingest.triggers.models import SeenSignature

    assert signed_post(client, "orders", {"order": 1}, **acme_creds, key="k-1").status_code == 202
    change(route)
    keyed = signed_post(client, "orders", {"order": 2}, **acme_creds, key="k-2")
    replay = signed_post(client, "orders", {"order": 1}, **acme_creds, key="k-1")
    unkeyed = signed_post(client, "orders", {"order": 3}, **acme_creds)
    for refused in (keyed, replay, unkeyed):
        assert refused.status_code in (401, 404, 409), refused.json()
        assert refused.json()["error"]["code"] in (
            "not_authenticated",
            "bad_signature",
            "route_not_found",
            "route_disabled",
        )
    assert Instance.objects.count() == 1 and IdempotencyKey.objects.count() <= 1
    assert not SeenSignature.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_debouncing_route_disabled_between_two_requests_refuses_the_second(
    client: Client, acme_creds: dict[str, str]
) -> None:
    from ingest.triggers.services import route_upsert

    route_upsert(
        name="orders",
        workflow="test-echo",
        tenant="acme",
        coalesce={"debounce": {"key": "account", "period": "1 minute"}},
    )
    assert signed_post(client, "orders", {"account": "a"}, **acme_creds, key="k-1").status_code == 202
    Route.objects.update(enabled=False)
    refused = signed_post(client, "orders", {"account": "a"}, **acme_creds, key="k-2")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "route_disabled"


@pytest.mark.django_db(transaction=True)
def test_a_change_that_refuses_nothing_is_seen_by_the_next_request(
    client: Client, route: Route, acme_creds: dict[str, str]
) -> None:
    # The route's workflow and priority changed between two requests: the second request's
    # instance is created from the route as it is now, not as the process last saw it.
    assert signed_post(client, "orders", {"order": 1}, **acme_creds, key="k-1").status_code == 202
    Route.objects.update(priority=7)
    second = signed_post(client, "orders", {"order": 2}, **acme_creds, key="k-2")
    assert second.status_code == 202
    assert Instance.objects.get(pk=second.json()["instance_id"]).priority == 7


@pytest.mark.django_db(transaction=True)
def test_a_routes_callback_url_read_with_the_instance_is_attached(
    client: Client, route: Route, acme_creds: dict[str, str]
) -> None:
    from django.utils import timezone

    from ingest.alerts.callbacks import route_callback_set
    from ingest.alerts.models import Callback

    assert signed_post(client, "orders", {"order": 1}, **acme_creds, key="k-1").status_code == 202
    route_callback_set(route="orders", url="https://example.com/hook", now=timezone.now())
    second = signed_post(client, "orders", {"order": 2}, **acme_creds, key="k-2").json()
    assert list(Callback.objects.values_list("instance_id", "url")) == [
        (second["instance_id"], "https://example.com/hook")
    ]


@pytest.mark.django_db(transaction=True)
def test_a_replayed_key_answers_the_instance_as_it_is_now(
    client: Client, route: Route, acme_creds: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dashboard.observability.ingress import counts

    first = signed_post(client, "orders", {"order": 2}, **acme_creds, key="k-2").json()
    Instance.objects.filter(pk=first["instance_id"]).update(status="complete", output={"done": 1})
    monkeypatch.setattr(counts, "due", lambda: False)
    with CaptureQueriesContext(connection) as queries:
        again = signed_post(client, "orders", {"order": 2}, **acme_creds, key="k-2")
    if connection.vendor == "postgresql":  # the statement that reads the key (the route is known)
        assert len(queries.captured_queries) == 1, [q["sql"] for q in queries.captured_queries]
    assert again.status_code == 200
    assert again.json()["status"] == "complete" and again.json()["output"] == {"done": 1}
    assert Instance.objects.count() == 1


def test_a_disabled_ingress_secret_is_refused_and_starts_nothing(
    client: Client, route: Route, acme_creds: dict[str, str]
) -> None:
    IngressSecret.objects.update(enabled=False)
    response = signed_post(client, "orders", {"order": 3}, **acme_creds, key="k-3")
    assert response.status_code == 401 and response.json()["error"]["code"] == "not_authenticated"
    assert not Instance.objects.exists() and not IdempotencyKey.objects.exists()


def test_the_lookup_returns_the_route_and_the_decrypted_secret_of_its_tenant_only(
    route: Route, acme_creds: dict[str, str]
) -> None:
    from ingest.triggers import signing
    from ingest.triggers.services import ingress_secret_create

    found = route_with_secret(name="orders", token_hash=signing.token_hash(acme_creds["token"]))
    assert found is not None
    got_route, secret = found.route, found.secret
    assert (got_route.pk, got_route.workflow, got_route.tenant) == (route.pk, route.workflow, route.tenant)
    assert got_route.created_at == route.created_at
    assert secret is not None and secret.hmac_secret == acme_creds["secret"]
    _, other_token, _ = ingress_secret_create(tenant="globex")
    other = route_with_secret(name="orders", token_hash=signing.token_hash(other_token))
    assert other is not None and (other.route, other.secret, other.current) == (got_route, None, None)
    assert route_with_secret(name="nope", token_hash="") is None


def test_a_replayed_key_with_another_body_is_a_conflict_and_writes_nothing(
    client: Client, route: Route, acme_creds: dict[str, str]
) -> None:
    first = signed_post(client, "orders", {"order": 4}, **acme_creds, key="k-4").json()
    again = signed_post(client, "orders", {"order": 5}, **acme_creds, key="k-4")
    assert again.status_code == 409 and first["instance_id"] in again.json()["error"]["message"]
    assert Instance.objects.count() == 1 and History.objects.count() == 1


def test_an_expired_key_starts_a_new_instance_and_takes_the_key_over(
    client: Client, route: Route, acme_creds: dict[str, str]
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    first = signed_post(client, "orders", {"order": 6}, **acme_creds, key="k-6").json()
    IdempotencyKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    again = signed_post(client, "orders", {"order": 6}, **acme_creds, key="k-6")
    assert again.status_code == 202 and again.json()["created"] is True
    assert again.json()["instance_id"] != first["instance_id"]
    kept = IdempotencyKey.objects.get(key="k-6")
    assert kept.instance_id == again.json()["instance_id"] and kept.expires_at > timezone.now()
    assert Instance.objects.count() == 2


def test_a_rotated_secret_stops_working_at_once_and_the_new_one_works(
    client: Client, route: Route, acme_creds: dict[str, str]
) -> None:
    from django.utils import timezone

    from ingest.triggers.services import ingress_secret_rotate

    assert signed_post(client, "orders", {"order": 7}, **acme_creds, key="k-7").status_code == 202
    _, token, secret = ingress_secret_rotate(
        tenant="acme", name="default", now=timezone.now(), overlap_seconds=0, reason="leaked"
    )
    old = signed_post(client, "orders", {"order": 8}, **acme_creds, key="k-8")
    assert old.status_code == 401
    # The old token with the new HMAC secret is refused too, and the new token with the old secret.
    assert (
        signed_post(client, "orders", {"order": 8}, token=acme_creds["token"], secret=secret, key="k-8").status_code
        == 401
    )
    assert (
        signed_post(client, "orders", {"order": 8}, token=token, secret=acme_creds["secret"], key="k-8").status_code
        == 401
    )
    assert signed_post(client, "orders", {"order": 8}, token=token, secret=secret, key="k-8").status_code == 202
    assert Instance.objects.count() == 2 and IdempotencyKey.objects.count() == 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_duplicate_blocked_behind_an_uncommitted_first_answers_the_first_ones_instance(
    route: Route, acme_creds: dict[str, str], require_postgres: None
) -> None:
    # The first request's key is inserted but not committed: the duplicate's statement waits on
    # the unique index, and its snapshot (taken before the first committed) cannot see the row.
    import json
    import threading
    import time
    from datetime import timedelta

    from django.db import transaction
    from django.utils import timezone

    from ingest.engine.services.instances import instance_create
    from ingest.triggers import signing

    body = {"order": 9}
    digest = signing.body_hash(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
    inserted, release = threading.Event(), threading.Event()

    def first_request() -> None:
        try:
            with transaction.atomic():
                now = timezone.now()
                instance_create(workflow="test-echo", id="orders-first", params=body, tenant="acme")
                IdempotencyKey.objects.create(
                    tenant="acme",
                    route="orders",
                    key="k-9",
                    body_sha256=digest,
                    instance_id="orders-first",
                    created_at=now,
                    expires_at=now + timedelta(days=1),
                )
                inserted.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=first_request)
    holder.start()
    assert inserted.wait(30)
    answers: list[Any] = []

    def duplicate() -> None:
        try:
            answers.append(signed_post(Client(), "orders", body, **acme_creds, key="k-9"))
        finally:
            connection.close()

    thread = threading.Thread(target=duplicate)
    thread.start()
    time.sleep(0.5)
    assert not answers  # blocked on the first one's key
    release.set()
    holder.join(30)
    thread.join(30)
    assert answers and answers[0].status_code == 200
    assert answers[0].json()["instance_id"] == "orders-first" and answers[0].json()["created"] is False
    assert list(Instance.objects.values_list("id", flat=True)) == ["orders-first"]
    assert IdempotencyKey.objects.count() == 1
