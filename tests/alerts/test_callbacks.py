"""Callbacks: a route, a REST start or an instance carries a URL; the outcome is POSTed there,
signed with the tenant's ingress secret, retried durably."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from ingest.alerts.callbacks import callback_register, route_callback_set
from ingest.alerts.follow import follow_round
from ingest.alerts.models import Callback, DeliveryState
from ingest.engine.models import DeadLetter, Instance
from ingest.engine.services.instances import instance_create
from ingest.triggers.services import ingress_secret_create, route_upsert
from tests.api.conftest import persona
from tests.fakes.receiver import WebhookReceiver
from tests.triggers.support import signed_post

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def acme_secret(db: Any) -> dict[str, str]:
    _, token, secret = ingress_secret_create(tenant="acme")
    return {"token": token, "secret": secret}


@pytest.fixture
def callee(acme_secret):
    with WebhookReceiver(secret=acme_secret["secret"]) as r:
        yield r


def test_a_route_callback_receives_the_outcome_signed_with_the_tenants_ingress_secret(
    following, acme_secret, callee, drain
):
    route_upsert(name="orders", workflow="alerts-test-ok", tenant="acme")
    route_callback_set(route="orders", url=callee.url, now=timezone.now())
    answer = signed_post(Client(), "orders", {"n": 7}, token=acme_secret["token"], secret=acme_secret["secret"])
    assert answer.status_code == 202, answer.content
    instance_id = answer.json()["instance_id"]
    drain()
    follow_round(now=timezone.now())
    drain()
    got = callee.wait_for(1)
    assert got[0].signed, got[0].problem
    body = got[0].json()
    assert body == {
        **body,
        "type": "instance.finished",
        "instance_id": instance_id,
        "status": "complete",
        "output": {"done": 7},
        "error": None,
    }
    assert got[0].headers["X-Runledger-Instance"] == instance_id
    callback = Callback.objects.get(instance_id=instance_id)
    assert (callback.source, callback.state, callback.last_status) == ("route", DeliveryState.DELIVERED, 200)


def test_a_rest_start_with_a_callback_url_posts_the_failure_after_the_receiver_recovers(
    following, acme_secret, callee, drain
):
    operator = persona("op", [("acme", "operator")])
    callee.fail_next(2, status=503)
    answer = operator.post(
        "/api/instances",
        {"workflow": "alerts-test-fail", "tenant": "acme", "params": {"order": 3}, "callback_url": callee.url},
    )
    assert answer.status_code == 201, answer.content
    instance_id = answer.json()["id"]
    drain()
    follow_round(now=timezone.now())
    drain()
    got = callee.wait_for(3)
    assert len(got) == 3 and all(r.signed for r in got)
    assert got[-1].json()["status"] == "errored"
    assert got[-1].json()["error"]["name"] == "NonRetryableError"
    callback = Callback.objects.get(instance_id=instance_id)
    assert (callback.state, callback.attempts) == (DeliveryState.DELIVERED, 3)


def test_a_bad_callback_url_is_a_422_and_starts_nothing(acme_secret):
    operator = persona("op", [("acme", "operator")])
    answer = operator.post(
        "/api/instances",
        {"workflow": "alerts-test-ok", "tenant": "acme", "id": "cb-bad", "callback_url": "ftp://example.com/x"},
    )
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "invalid_callback"
    assert "is not an http(s) URL" in answer.json()["error"]["message"]
    assert not Instance.objects.filter(id="cb-bad").exists()


def test_a_callback_that_keeps_failing_ends_failed_and_dead_lettered(following, acme_secret, callee, drain, settings):
    settings.RUNLEDGER_DELIVERY_RETRIES = 2
    callee.fail_next(10, status=500)
    inst = instance_create(workflow="alerts-test-ok", params={"n": 1}, tenant="acme")
    callback_register(instance_id=inst.id, tenant="acme", url=callee.url, source="instance", now=timezone.now())
    drain()
    follow_round(now=timezone.now())
    drain()
    follow_round(now=timezone.now())
    callback = Callback.objects.get(instance_id=inst.id)
    assert callback.state == DeliveryState.FAILED and callback.attempts == 3
    assert "answered 500" in callback.last_error
    assert DeadLetter.objects.filter(instance_id=callback.delivery_instance_id, state="open").exists()


def test_a_callback_registered_after_the_instance_ended_is_still_sent_once(following, acme_secret, callee, drain):
    inst = instance_create(workflow="alerts-test-ok", params={"n": 2}, tenant="acme")
    drain()
    follow_round(now=timezone.now())  # the end is read before any callback exists
    callback_register(instance_id=inst.id, tenant="acme", url=callee.url, source="instance", now=timezone.now())
    follow_round(now=timezone.now())
    drain()
    assert len(callee.wait_for(1)) == 1
    assert Instance.objects.filter(workflow="callback-deliver").count() == 1


def _callback_to(url: str, drain: Any, n: int) -> None:
    inst = instance_create(workflow="alerts-test-ok", params={"n": n}, tenant="acme")
    callback_register(instance_id=inst.id, tenant="acme", url=url, source="instance", now=timezone.now())
    drain()
    follow_round(now=timezone.now())
    drain()


def test_during_a_rotations_overlap_a_callback_verifies_with_the_old_secret_and_with_the_new(
    following, acme_secret, callee, drain
):
    from ingest.triggers.services import ingress_secret_rotate
    from ingest.triggers.signing import verify

    _, _, new_secret = ingress_secret_rotate(
        tenant="acme", name="default", now=timezone.now(), overlap_seconds=3600, reason="yearly rotation"
    )
    _callback_to(callee.url, drain, 1)
    got = callee.wait_for(1)[0]
    assert got.signed, got.problem  # the receiver still holds the old secret
    header = got.headers["X-Runledger-Signature"]
    assert len(header.split(",")) == 2
    verify(
        secrets=[new_secret],
        timestamp=got.headers["X-Runledger-Timestamp"],
        signature=header,
        body=got.body,
        now=timezone.now(),
    )  # and one that moved to the new secret verifies it too
    with WebhookReceiver(secret=new_secret) as moved:
        ingress_secret_rotate(tenant="acme", name="default", now=timezone.now(), overlap_seconds=0, reason="again")
        newest = ingress_secret_rotate(
            tenant="acme", name="default", now=timezone.now(), overlap_seconds=0, reason="once more"
        )[2]
        moved.secret = newest
        _callback_to(moved.url, drain, 2)
        after = moved.wait_for(1)[0]
    assert after.signed, after.problem
    assert "," not in after.headers["X-Runledger-Signature"]  # no overlap: one signature, the newest secret's


def test_a_tenant_without_an_ingress_secret_cannot_sign_callbacks(db):
    inst = instance_create(workflow="alerts-test-ok", params={}, tenant="globex")
    from ingest.alerts.errors import InvalidCallback

    with pytest.raises(InvalidCallback, match="has no enabled ingress secret"):
        callback_register(instance_id=inst.id, tenant="globex", url="http://127.0.0.1:9/x", now=timezone.now())
    assert not Callback.objects.exists()


def test_the_instance_page_shows_its_trace_id_and_how_its_callback_went(following, acme_secret, callee, drain):
    from dashboard.access import demo_users_ensure
    from ingest.engine import tracing

    demo_users_ensure()
    client = Client()
    assert client.login(username="operator", password="operator")
    inst = instance_create(workflow="alerts-test-ok", params={"n": 4}, tenant="acme")
    callback_register(instance_id=inst.id, tenant="acme", url=callee.url, source="instance", now=timezone.now())
    drain()
    follow_round(now=timezone.now())
    drain()
    html = client.get(f"/instances/{inst.id}/").content.decode()
    assert tracing.trace_id_hex(inst.id) in html
    assert "delivered" in html and "HTTP 200" in html and callee.url[:40] in html
