"""The API tokens page: a user makes a token (shown once), lists their tokens by prefix only,
revokes one after a confirmation; the token works with the REST API until it is revoked or
expires. From the operator's, the viewer's and the stranger's side: each manages their own
tokens and no one else's."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.models import AuditEntry
from ingest.triggers import signing
from ingest.triggers.models import ApiToken

pytestmark = [pytest.mark.db, pytest.mark.django_db]
TOKEN = re.compile(r'id="new-token"[^>]*value="(rla_[A-Za-z0-9_-]+)"')


def create(client: Client, name: str = "laptop cli", expires_days: str = "") -> tuple[Any, str]:
    response = client.post("/tokens/create/", {"name": name, "expires_days": expires_days})
    found = TOKEN.search(response.content.decode())
    return response, found.group(1) if found else ""


def api(token: str) -> int:
    return Client().get("/api/instances", headers={"Authorization": f"Bearer {token}"}).status_code


def test_a_created_token_is_shown_once_and_never_again(operator: Client) -> None:
    response, token = create(operator)
    assert response.status_code == 200 and token.startswith("rla_")
    assert "no-store" in response["Cache-Control"]
    row = ApiToken.objects.get(user__username="operator")
    assert row.name == "laptop cli" and row.token_hash == signing.token_hash(token)
    assert token not in str(ApiToken.objects.filter(pk=row.pk).values().get())  # only its hash is kept
    again = operator.get("/tokens/").content.decode()
    assert token not in again and 'id="new-token"' not in again
    assert f"{row.token_prefix}…" in again and "laptop cli" in again


def test_the_token_authenticates_the_api_until_it_is_revoked(operator: Client) -> None:
    _, token = create(operator)
    assert api(token) == 200
    row = ApiToken.objects.get(user__username="operator")
    assert ApiToken.objects.get(pk=row.pk).last_used_at is not None
    confirm = operator.get(f"/tokens/{row.pk}/revoke/")
    assert confirm.status_code == 200 and "Revoke token" in confirm.content.decode()
    assert ApiToken.objects.get(pk=row.pk).revoked_at is None  # the confirmation page changes nothing
    done = operator.post(f"/tokens/{row.pk}/revoke/run/", follow=True)
    assert done.status_code == 200 and "revoked" in done.content.decode()
    assert ApiToken.objects.get(pk=row.pk).revoked_at is not None
    answer = Client().get("/api/instances", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401 and "/tokens/" in answer.json()["error"]["message"]


def test_create_and_revoke_each_write_one_audit_entry_without_the_token(operator: Client) -> None:
    _, token = create(operator, name="audited", expires_days="30")
    row = ApiToken.objects.get(user__username="operator")
    operator.post(f"/tokens/{row.pk}/revoke/run/")
    entries = list(AuditEntry.objects.filter(action__startswith="api_token.").order_by("pk"))
    assert [e.action for e in entries] == ["api_token.create", "api_token.revoke"]
    assert all(e.actor == "operator" and e.source == "web" for e in entries)
    assert entries[0].selection["name"] == "audited" and entries[0].selection["expires_at"]
    assert sorted(entries[0].tenants) == ["acme", "default", "globex"]
    assert not any(token in str(e.selection) for e in entries)


def test_an_expiry_is_set_in_days_and_an_expired_token_is_refused(operator: Client) -> None:
    _, token = create(operator, expires_days="7")
    row = ApiToken.objects.get(user__username="operator")
    assert row.expires_at is not None
    assert timedelta(days=6, hours=23) < row.expires_at - timezone.now() <= timedelta(days=7)
    ApiToken.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert api(token) == 401
    assert 'data-state="expired"' in operator.get("/tokens/").content.decode()


@pytest.mark.parametrize(
    ("name", "days", "wrong"),
    [
        ("", "", "name"),
        ("x" * 101, "", "name"),
        ("ok", "0", "expires_days"),
        ("ok", "3651", "expires_days"),
        ("ok", "soon", "expires_days"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_creates_nothing(
    operator: Client, name: str, days: str, wrong: str
) -> None:
    response, token = create(operator, name=name, expires_days=days)
    assert response.status_code == 400 and token == ""
    assert response.context["form"].errors.keys() == {wrong}
    assert not ApiToken.objects.exists() and not AuditEntry.objects.exists()


def test_every_invalid_field_is_reported_at_once(operator: Client) -> None:
    response, _ = create(operator, name="", expires_days="-3")
    assert response.status_code == 400
    assert response.context["form"].errors.keys() == {"name", "expires_days"}


@pytest.mark.parametrize("persona", ["operator", "viewer"])
def test_operators_and_viewers_both_manage_their_own_tokens(persona: str, request: pytest.FixtureRequest) -> None:
    client: Client = request.getfixturevalue(persona)
    _, token = create(client, name=f"{persona} cli")
    assert api(token) == 200
    row = ApiToken.objects.get(user__username=persona)
    assert client.post(f"/tokens/{row.pk}/revoke/run/").status_code == 302
    assert api(token) == 401


def test_another_user_can_neither_see_nor_revoke_a_token(operator: Client, stranger: Client, viewer: Client) -> None:
    _, token = create(operator, name="operators own")
    row = ApiToken.objects.get(user__username="operator")
    for other in (stranger, viewer):
        page = other.get("/tokens/").content.decode()
        assert "operators own" not in page and row.token_prefix not in page
        assert other.get(f"/tokens/{row.pk}/revoke/").status_code == 404
        assert other.post(f"/tokens/{row.pk}/revoke/run/").status_code == 404
    assert ApiToken.objects.get(pk=row.pk).revoked_at is None and api(token) == 200
    assert not AuditEntry.objects.filter(action="api_token.revoke").exists()


def test_the_page_needs_a_signed_in_user_and_a_post_with_csrf(users: None) -> None:
    anonymous = Client()
    assert anonymous.get("/tokens/").status_code == 302
    assert anonymous.post("/tokens/create/", {"name": "x"}).status_code == 302
    strict = Client(enforce_csrf_checks=True)
    assert strict.login(username="operator", password="operator")
    assert strict.post("/tokens/create/", {"name": "x"}).status_code == 403
    assert strict.get("/tokens/create/").status_code == 405
    assert not ApiToken.objects.exists()


def test_the_user_menu_links_the_tokens_page(viewer: Client) -> None:
    assert 'href="/tokens/"' in viewer.get("/instances/").content.decode()
