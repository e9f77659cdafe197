"""Ingress credentials over the REST API: a new pair in the creating answer only (never cached,
never listed, never audited), every invalid field named at once, a rotation that asks why and
keeps the old pair for the overlap it names (0: not at all), and the three personas' sides."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client

from dashboard.models import AuditEntry
from ingest.triggers.models import IngressSecret
from ingest.triggers.services import ingress_secret_create, route_upsert
from tests.api.conftest import ApiClient
from tests.triggers.support import signed_post

pytestmark = [pytest.mark.db, pytest.mark.django_db]


@pytest.fixture
def orders(db: Any) -> None:
    route_upsert(name="orders", workflow="test-echo", tenant="acme")


def works(pair: dict[str, str]) -> bool:
    answer = signed_post(Client(), "orders", {"request": uuid.uuid4().hex}, token=pair["token"], secret=pair["secret"])
    assert answer.status_code in (202, 401), answer.content
    return bool(answer.status_code == 202)


def test_a_credential_made_over_the_api_signs_requests_and_is_never_shown_again(
    operator: ApiClient, orders: None
) -> None:
    made = operator.post("/api/ingress-credentials", {"tenant": "acme", "name": "shop", "rate_limit_per_minute": 600})
    assert made.status_code == 201 and made["Cache-Control"] == "no-store"
    pair = made.json()
    assert pair["token"].startswith("rli_") and pair["secret"].startswith("rls_") and works(pair)
    listed = operator.get("/api/ingress-credentials")
    assert [(c["name"], c["token_prefix"], c["rate_limit_per_minute"]) for c in listed.json()] == [
        ("shop", pair["token"][:10], 600)
    ]
    entry = AuditEntry.objects.get()
    assert entry.action == "ingress_secret.create" and entry.tenants == ["acme"]
    for text in (listed.content.decode(), str(AuditEntry.objects.values().get())):
        assert pair["token"] not in text and pair["secret"] not in text
    again = operator.post("/api/ingress-credentials", {"tenant": "acme", "name": "shop"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "ingress_secret_exists"


def test_every_invalid_credential_field_is_named_at_once_and_nothing_is_made(operator: ApiClient) -> None:
    bad = operator.post(
        "/api/ingress-credentials", {"tenant": "acme", "name": "shop/webhook", "rate_limit_per_minute": 0}
    )
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_ingress_secret"
    assert set(bad.json()["error"]["fields"]) == {"name", "rate_limit_per_minute"}
    typed = operator.post("/api/ingress-credentials", {"tenant": 7, "name": ["x"]})
    assert typed.status_code == 400 and set(typed.json()["error"]["fields"]) == {"tenant", "name"}
    assert not IngressSecret.objects.exists() and not AuditEntry.objects.exists()


def test_rotation_keeps_the_old_pair_for_its_overlap_and_audits_the_reason(operator: ApiClient, orders: None) -> None:
    _, token, secret = ingress_secret_create(tenant="acme", name="shop")
    old = {"token": token, "secret": secret}
    rotated = operator.post(
        "/api/ingress-credentials/acme/shop/rotate", {"reason": "yearly rotation", "overlap_seconds": 3600}
    )
    assert rotated.status_code == 200 and rotated["Cache-Control"] == "no-store"
    new = rotated.json()
    assert new["previous_valid_until"] is not None and works(old) and works(new)
    listed = operator.get("/api/ingress-credentials").json()[0]
    assert (listed["token_prefix"], listed["previous_token_prefix"]) == (new["token"][:10], token[:10])
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.reason, entry.selection) == (
        "ingress_secret.rotate",
        "yearly rotation",
        {"tenant": "acme", "name": "shop", "overlap_seconds": 3600},
    )
    at_once = operator.post("/api/ingress-credentials/acme/shop/rotate", {"reason": "leaked", "overlap_seconds": 0})
    assert at_once.json()["previous_valid_until"] is None
    assert not works(old) and not works(new) and works(at_once.json())


def test_the_default_overlap_is_one_hour(operator: ApiClient, orders: None) -> None:
    _, token, secret = ingress_secret_create(tenant="acme")
    rotated = operator.post("/api/ingress-credentials/acme/default/rotate", {"reason": "yearly"}).json()
    row = IngressSecret.objects.get()
    assert round((row.previous_valid_until - row.rotated_at).total_seconds()) == 3600
    assert rotated["previous_valid_until"] is not None and works({"token": token, "secret": secret})


def test_a_rotation_without_a_reason_or_with_a_bad_overlap_changes_nothing(operator: ApiClient, orders: None) -> None:
    _, token, secret = ingress_secret_create(tenant="acme")
    before = IngressSecret.objects.values().get()
    for body, fields in (
        ({"reason": " ", "overlap_seconds": -5}, {"reason", "overlap_seconds"}),
        ({"reason": "ok", "overlap_seconds": 10**9}, {"overlap_seconds"}),
        ({"reason": None}, {"reason"}),
    ):
        refused = operator.post("/api/ingress-credentials/acme/default/rotate", body)
        assert refused.status_code == 400 and set(refused.json()["error"]["fields"]) == fields, refused.content
    missing = operator.post("/api/ingress-credentials/acme/default/rotate", {})
    assert missing.status_code == 422
    assert operator.post("/api/ingress-credentials/acme/nope/rotate", {"reason": "x"}).status_code == 404
    assert IngressSecret.objects.values().get() == before and not AuditEntry.objects.exists()
    assert works({"token": token, "secret": secret})


def test_a_viewer_and_a_stranger_can_neither_make_nor_rotate(
    viewer: ApiClient, stranger: ApiClient, orders: None
) -> None:
    _, token, secret = ingress_secret_create(tenant="acme")
    before = list(IngressSecret.objects.values())
    assert viewer.post("/api/ingress-credentials", {"tenant": "acme", "name": "x"}).status_code == 403
    assert viewer.post("/api/ingress-credentials/acme/default/rotate", {"reason": "x"}).status_code == 403
    assert stranger.post("/api/ingress-credentials", {"tenant": "acme", "name": "x"}).status_code == 404
    assert stranger.post("/api/ingress-credentials/acme/default/rotate", {"reason": "x"}).status_code == 404
    assert stranger.get("/api/ingress-credentials").json() == []
    assert list(IngressSecret.objects.values()) == before and not AuditEntry.objects.exists()
    assert works({"token": token, "secret": secret})


def test_no_log_line_carries_a_new_pair(operator: ApiClient, orders: None, caplog: pytest.LogCaptureFixture) -> None:
    ingress_secret_create(tenant="acme")
    with caplog.at_level("DEBUG"):
        made = operator.post("/api/ingress-credentials", {"tenant": "acme", "name": "shop"}).json()
        rotated = operator.post("/api/ingress-credentials/acme/default/rotate", {"reason": "yearly"}).json()
        assert works(made) and works(rotated)
        operator.post("/api/ingress-credentials/acme/default/rotate", {"reason": "again", "overlap_seconds": -1})
    logged = "\n".join(f"{r.getMessage()} {r.args!r}" for r in caplog.records)
    assert "Bad Request" in logged  # the refused request was logged, and nothing of a pair
    for pair in (made, rotated):
        assert pair["token"] not in logged and pair["secret"] not in logged
