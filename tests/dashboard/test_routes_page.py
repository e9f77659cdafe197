"""The routes and subscriptions pages: deliveries and their outcome, coalesce shown, edited with
validation and its open windows listed, and ingress credentials rotated write-only; from the
operator's, the viewer's and the stranger's side."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard.models import AuditEntry
from ingest.triggers.models import IngressSecret, Route, Subscription
from ingest.triggers.services import (
    event_publish,
    ingress_secret_create,
    route_upsert,
    subscription_create,
)
from tests.triggers.support import signed_post

pytestmark = [pytest.mark.db, pytest.mark.django_db]
DEBOUNCE = {"debounce": {"key": "account", "period": "1 hour"}}


@pytest.fixture
def acme(db: Any) -> dict[str, Any]:
    _, token, secret = ingress_secret_create(tenant="acme")
    route = route_upsert(name="orders", workflow="test-echo", tenant="acme")
    coalesced = route_upsert(name="crm-sync", workflow="test-echo", tenant="acme", coalesce=DEBOUNCE)
    sub = subscription_create(workflow="test-echo", pattern="user.*", tenant="acme")
    return {"token": token, "secret": secret, "route": route, "coalesced": coalesced, "sub": sub}


def test_a_route_lists_its_deliveries_with_their_outcome(operator: Client, acme: dict[str, Any]) -> None:
    answer = signed_post(Client(), "orders", {"n": 1}, token=acme["token"], secret=acme["secret"]).json()
    instance_id = answer["instance_id"]
    body = operator.get("/routes/orders/").content.decode()
    assert instance_id in body and "status-queued" in body
    listing = operator.get("/routes/").content.decode()
    row = listing.split('data-route="orders"')[1].split("</tr>")[0]
    assert instance_id[:27] in row and "test-echo" in row


def test_a_coalesced_route_shows_its_setting_and_open_windows(operator: Client, acme: dict[str, Any]) -> None:
    for account in ("a1", "a1", "b2"):
        signed_post(
            Client(),
            "crm-sync",
            {"account": account, "x": timezone.now().isoformat()},
            token=acme["token"],
            secret=acme["secret"],
        )
    body = operator.get("/routes/crm-sync/").content.decode()
    windows = body.split("Open windows")[1]
    assert windows.count("<tr>") == 3  # header + two keys
    a1 = windows.split('"mono">a1</td>')[1].split("</tr>")[0]
    assert 'class="num">2<' in a1 and "/instances/route-crm-sync-debounce-" in a1
    listing = operator.get("/routes/").content.decode().split('data-route="crm-sync"')[1].split("</tr>")[0]
    assert "debounce" in listing and 'class="num">2<' in listing


def test_a_subscription_lists_matched_events_and_the_instances_they_started(
    operator: Client, acme: dict[str, Any]
) -> None:
    published = event_publish(type="user.created", data={"u": 1}, tenant="acme", now=timezone.now())
    event_publish(type="order.placed", data={}, tenant="acme", now=timezone.now())
    body = operator.get(f"/subscriptions/{acme['sub'].pk}/").content.decode()
    assert published.started[0] in body and "user.created" in body and "order.placed" not in body


def test_the_operator_edits_coalesce_and_a_bad_setting_changes_nothing(operator: Client, acme: dict[str, Any]) -> None:
    bad = operator.post("/routes/orders/coalesce/", {"coalesce": '{"debounce": {"key": "a"}}'})
    assert bad.status_code == 400 and "needs a period" in bad.content.decode()
    assert "errorlist" in bad.content.decode().split('for="id_coalesce"')[1]
    bad_json = operator.post("/routes/orders/coalesce/", {"coalesce": "{oops"})
    assert bad_json.status_code == 400 and "not valid JSON" in bad_json.content.decode()
    assert Route.objects.get(name="orders").coalesce == {} and not AuditEntry.objects.exists()
    ok = operator.post("/routes/orders/coalesce/", {"coalesce": '{"batch": {"max_size": 10, "timeout": "5 seconds"}}'})
    assert ok.status_code == 302
    assert Route.objects.get(name="orders").coalesce == {"batch": {"max_size": 10, "timeout": "5 seconds"}}
    off = operator.post(f"/subscriptions/{acme['sub'].pk}/coalesce/", {"coalesce": ""})
    assert off.status_code == 302 and Subscription.objects.get(pk=acme["sub"].pk).coalesce == {}
    assert list(AuditEntry.objects.order_by("id").values_list("action", flat=True)) == [
        "route.coalesce",
        "subscription.coalesce",
    ]


def test_rotation_shows_the_new_pair_once_and_only_the_new_pair_works(operator: Client, acme: dict[str, Any]) -> None:
    response = operator.post("/credentials/acme/default/rotate/run/", {"reason": "leaked", "overlap_seconds": "0"})
    assert response.status_code == 200 and "no-cache" in response["Cache-Control"]
    body = response.content.decode()
    token = body.split('id="new-token" class="secret-once" readonly value="')[1].split('"')[0]
    secret = body.split('id="new-secret" class="secret-once" readonly value="')[1].split('"')[0]
    assert token.startswith("rli_") and secret.startswith("rls_") and token != acme["token"]
    # Encrypted at rest: the column holds neither the new secret nor anything the old one was.
    with connection.cursor() as cursor:
        cursor.execute("SELECT hmac_secret FROM triggers_ingresssecret WHERE tenant = 'acme'")
        (stored,) = cursor.fetchone()
    assert secret not in stored and acme["secret"] not in stored
    assert IngressSecret.objects.get(tenant="acme").hmac_secret == secret
    old = signed_post(Client(), "orders", {}, token=acme["token"], secret=acme["secret"])
    new = signed_post(Client(), "orders", {}, token=token, secret=secret)
    assert old.status_code == 401 and new.status_code in (201, 202)
    # Never shown again: the pages carry only the prefix.
    for page in ("/routes/", "/routes/orders/"):
        html = operator.get(page).content.decode()
        assert token not in html and secret not in html
    assert token[:10] in operator.get("/routes/").content.decode()
    assert AuditEntry.objects.get().action == "ingress_secret.rotate"
    assert token not in str(AuditEntry.objects.values().get())


def test_the_routes_page_never_decrypts_a_secret(operator: Client, acme: dict[str, Any]) -> None:
    with CaptureQueriesContext(connection) as queries:
        operator.get("/routes/")
    assert not any("hmac_secret" in q["sql"] for q in queries.captured_queries)


def test_a_viewer_reads_but_cannot_rotate_or_edit(viewer: Client, acme: dict[str, Any]) -> None:
    listing = viewer.get("/routes/").content.decode()
    assert "orders" in listing and "/rotate/" not in listing and "/credentials/new/" not in listing
    assert viewer.get("/credentials/acme/default/rotate/").status_code == 403
    assert (
        viewer.post("/credentials/acme/default/rotate/run/", {"reason": "x", "overlap_seconds": "0"}).status_code == 403
    )
    assert viewer.post("/routes/orders/coalesce/", {"coalesce": ""}).status_code == 403
    assert viewer.post(f"/subscriptions/{acme['sub'].pk}/coalesce/", {"coalesce": ""}).status_code == 403
    assert signed_post(Client(), "orders", {}, token=acme["token"], secret=acme["secret"]).status_code in (201, 202)
    assert Route.objects.get(name="crm-sync").coalesce == DEBOUNCE


def test_a_stranger_sees_none_of_another_tenants_routes(stranger: Client, acme: dict[str, Any]) -> None:
    listing = stranger.get("/routes/").content.decode()
    assert "orders" not in listing and "user.*" not in listing and acme["token"][:10] not in listing
    assert stranger.get("/routes/orders/").status_code == 404
    assert stranger.get(f"/subscriptions/{acme['sub'].pk}/").status_code == 404
    assert (
        stranger.post("/credentials/acme/default/rotate/run/", {"reason": "x", "overlap_seconds": "0"}).status_code
        == 404
    )
    assert stranger.post("/routes/orders/coalesce/", {"coalesce": ""}).status_code == 404
    assert signed_post(Client(), "orders", {}, token=acme["token"], secret=acme["secret"]).status_code in (201, 202)
