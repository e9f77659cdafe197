"""Ingress credentials in the console: made by an operator for a tenant they operate and shown
once (never cached, never again); rotated only after a confirmation that asks why and for how
long the old pair keeps working; a refused form changes nothing; audited without the pair; the
viewer and the stranger can do neither."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client

from dashboard.models import AuditEntry
from ingest.triggers.models import IngressSecret
from ingest.triggers.services import ingress_secret_create, route_upsert
from tests.triggers.support import signed_post

pytestmark = [pytest.mark.db, pytest.mark.django_db]


@pytest.fixture
def orders(db: Any) -> None:
    route_upsert(name="orders", workflow="test-echo", tenant="acme")


def shown(response: Any) -> tuple[str, str]:
    body = response.content.decode()
    token = body.split('id="new-token" class="secret-once" readonly value="')[1].split('"')[0]
    secret = body.split('id="new-secret" class="secret-once" readonly value="')[1].split('"')[0]
    return token, secret


def status(token: str, secret: str) -> int:
    return int(signed_post(Client(), "orders", {"request": uuid.uuid4().hex}, token=token, secret=secret).status_code)


def test_an_operator_makes_a_credential_that_is_shown_once_with_copy_buttons(operator: Client, orders: None) -> None:
    assert 'href="/credentials/new/"' in operator.get("/routes/").content.decode()
    form = operator.get("/credentials/new/").content.decode()
    assert 'value="acme"' in form and 'value="initech"' not in form
    made = operator.post("/credentials/new/create/", {"tenant": "acme", "name": "shop", "rate_limit_per_minute": ""})
    assert made.status_code == 200 and "no-store" in made["Cache-Control"]
    token, secret = shown(made)
    body = made.content.decode()
    assert 'data-copy="#new-token"' in body and 'data-copy="#new-secret"' in body and "js/copy.js" in body
    assert status(token, secret) == 202
    for page in ("/routes/", "/credentials/acme/shop/rotate/"):
        html = operator.get(page).content.decode()
        assert token not in html and secret not in html and token[:10] in html
    entry = AuditEntry.objects.get()
    assert entry.action == "ingress_secret.create" and token not in str(entry.selection) + entry.reason


def test_a_bad_credential_names_every_field_and_makes_nothing(operator: Client) -> None:
    ingress_secret_create(tenant="acme", name="shop")
    refused = operator.post(
        "/credentials/new/create/", {"tenant": "initech", "name": "a/b", "rate_limit_per_minute": "0"}
    )
    assert refused.status_code == 400
    assert set(refused.context["form"].errors) == {"tenant", "name", "rate_limit_per_minute"}
    taken = operator.post("/credentials/new/create/", {"tenant": "acme", "name": "shop"})
    assert (
        taken.status_code == 400 and "already has a credential named 'shop'" in taken.context["form"].errors["name"][0]
    )
    assert IngressSecret.objects.count() == 1 and not AuditEntry.objects.exists()


def test_rotation_asks_why_then_keeps_the_old_pair_for_the_chosen_overlap(operator: Client, orders: None) -> None:
    _, token, secret = ingress_secret_create(tenant="acme")
    assert operator.post("/credentials/acme/default/rotate/").status_code == 405  # no rotation without the form
    confirm = operator.get("/credentials/acme/default/rotate/")
    assert confirm.status_code == 200
    page = confirm.content.decode()
    assert 'name="reason"' in page and '<option value="3600" selected>1 hour</option>' in page
    assert IngressSecret.objects.get().rotated_at is None
    rotated = operator.post(
        "/credentials/acme/default/rotate/run/", {"reason": "yearly rotation", "overlap_seconds": "3600"}
    )
    assert rotated.status_code == 200 and "no-store" in rotated["Cache-Control"]
    new_token, new_secret = shown(rotated)
    assert "keep working until" in rotated.content.decode()
    assert status(token, secret) == 202 and status(new_token, new_secret) == 202
    listing = operator.get("/routes/").content.decode().split('data-credential="acme/default"')[1].split("</tr>")[0]
    assert new_token[:10] in listing and f"old {token[:10]}… works until" in listing
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.reason, entry.selection["overlap_seconds"]) == (
        "ingress_secret.rotate",
        "yearly rotation",
        3600,
    )
    assert new_token not in str(AuditEntry.objects.values().get())


def test_with_no_overlap_the_old_pair_stops_at_once(operator: Client, orders: None) -> None:
    _, token, secret = ingress_secret_create(tenant="acme")
    rotated = operator.post("/credentials/acme/default/rotate/run/", {"reason": "leaked", "overlap_seconds": "0"})
    assert "no longer work" in rotated.content.decode()
    assert status(token, secret) == 401 and status(*shown(rotated)) == 202


def test_a_rotation_without_a_reason_changes_nothing(operator: Client, orders: None) -> None:
    _, token, secret = ingress_secret_create(tenant="acme")
    before = IngressSecret.objects.values().get()
    for data in (
        {"reason": "   ", "overlap_seconds": "3600"},
        {"reason": "x", "overlap_seconds": "42"},
        {"overlap_seconds": "0"},
    ):
        refused = operator.post("/credentials/acme/default/rotate/run/", data)
        assert refused.status_code == 400 and "new-token" not in refused.content.decode()
    both = operator.post("/credentials/acme/default/rotate/run/", {"reason": " ", "overlap_seconds": "42"})
    assert set(both.context["form"].errors) == {"reason", "overlap_seconds"}
    assert IngressSecret.objects.values().get() == before and not AuditEntry.objects.exists()
    assert status(token, secret) == 202


def test_a_viewer_and_a_stranger_can_neither_make_nor_rotate(viewer: Client, stranger: Client, orders: None) -> None:
    _, token, secret = ingress_secret_create(tenant="acme")
    before = list(IngressSecret.objects.values())
    assert viewer.get("/credentials/new/").status_code == 403
    assert viewer.post("/credentials/new/create/", {"tenant": "acme", "name": "x"}).status_code == 403
    assert viewer.get("/credentials/acme/default/rotate/").status_code == 403
    assert stranger.get("/credentials/acme/default/rotate/").status_code == 404
    assert stranger.post("/credentials/new/create/", {"tenant": "acme", "name": "x"}).status_code == 400
    assert list(IngressSecret.objects.values()) == before and not AuditEntry.objects.exists()
    assert status(token, secret) == 202
