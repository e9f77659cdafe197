"""Signed ingress in few statements: the route and the credential in one lookup, the key, the
instance and its history in one transaction, no read-back of what the request just wrote."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from ingest.engine.models import History, Instance
from ingest.triggers.models import IdempotencyKey, IngressSecret, Route
from ingest.triggers.sql import route_with_secret
from tests.triggers.support import signed_post

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def test_a_keyed_request_starts_its_instance_in_at_most_seven_statements(
        client: Client, route: Route, acme_creds: dict[str, str], django_assert_max_num_queries: Any) -> None:
    # lookup, BEGIN, key, instance, history, COMMIT, the route's callback: 7 (it was 12)
    with django_assert_max_num_queries(7):
        response = signed_post(client, "orders", {"order": 1}, **acme_creds, key="k-1")
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "queued" and body["created"] is True
    instance = Instance.objects.get(pk=body["instance_id"])
    assert instance.status == "queued"
    assert IdempotencyKey.objects.get(key="k-1").instance_id == instance.id
    assert History.objects.filter(instance_id=instance.id, kind="instance.created").count() == 1


def test_a_replayed_key_answers_the_instance_as_it_is_now(client: Client, route: Route,
                                                           acme_creds: dict[str, str]) -> None:
    first = signed_post(client, "orders", {"order": 2}, **acme_creds, key="k-2").json()
    Instance.objects.filter(pk=first["instance_id"]).update(status="complete", output={"done": 1})
    again = signed_post(client, "orders", {"order": 2}, **acme_creds, key="k-2")
    assert again.status_code == 200
    assert again.json()["status"] == "complete" and again.json()["output"] == {"done": 1}
    assert Instance.objects.count() == 1


def test_a_disabled_ingress_secret_is_refused_and_starts_nothing(client: Client, route: Route,
                                                                 acme_creds: dict[str, str]) -> None:
    IngressSecret.objects.update(enabled=False)
    response = signed_post(client, "orders", {"order": 3}, **acme_creds, key="k-3")
    assert response.status_code == 401 and response.json()["error"]["code"] == "not_authenticated"
    assert not Instance.objects.exists() and not IdempotencyKey.objects.exists()


def test_the_lookup_returns_the_route_and_the_decrypted_secret_of_its_tenant_only(
        route: Route, acme_creds: dict[str, str]) -> None:
    from ingest.triggers import signing
    from ingest.triggers.services import ingress_secret_create

    found = route_with_secret(name="orders", token_hash=signing.token_hash(acme_creds["token"]))
    assert found is not None
    got_route, secret = found
    assert (got_route.pk, got_route.workflow, got_route.tenant) == (route.pk, route.workflow, route.tenant)
    assert got_route.created_at == route.created_at
    assert secret is not None and secret.hmac_secret == acme_creds["secret"]
    _, other_token, _ = ingress_secret_create(tenant="globex")
    assert route_with_secret(name="orders", token_hash=signing.token_hash(other_token)) == (got_route, None)
    assert route_with_secret(name="nope", token_hash="") is None
