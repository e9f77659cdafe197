"""Source connections in the console: an operator adds one for a tenant they operate, with only
its kind's fields; secrets are write-only (never in a page, shown as set with their masked end,
kept when the field is left empty); a refused form names every field and writes nothing; a stale
tab is refused (409) instead of undoing another's edit; "Test connection" makes one call and
shows and keeps the outcome; every action is audited without secrets; the viewer and the
stranger can do none of it. Ingress credentials are disabled, enabled and deleted (after a
confirmation) from the routes page."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client

from dashboard.models import AuditEntry
from ingest.pipelines.connections import connection_create, connection_update, connection_version
from ingest.pipelines.models import Connection, ConnectionCursor
from ingest.triggers.models import IngressSecret
from ingest.triggers.services import ingress_secret_create, route_upsert
from tests.fakes import FakeDataForSEO
from tests.triggers.support import signed_post

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def test_an_operator_adds_a_connection_of_a_kind_with_its_own_fields(operator: Client) -> None:
    assert 'href="/connections/"' in operator.get("/").content.decode()
    chooser = operator.get("/connections/new/").content.decode()
    assert "?kind=dataforseo" in chooser and "?kind=zenrows" in chooser
    form = operator.get("/connections/new/?kind=dataforseo").content.decode()
    assert 'name="key"' in form and 'name="secret"' in form and 'name="refresh_token"' not in form
    assert "API login" in form and 'value="acme"' in form and 'value="initech"' not in form
    made = operator.post(
        "/connections/new/create/",
        {
            "kind": "dataforseo",
            "tenant": "acme",
            "key": "dfs-login",
            "secret": "dfs-password-1234",
            "base_url": "",
            "options": "",
            "enabled": "on",
        },
    )
    assert made.status_code == 302 and made["Location"] == "/connections/acme/dataforseo/"
    row = Connection.objects.get()
    assert (row.tenant, row.kind, row.key, row.secret, row.enabled) == (
        "acme",
        "dataforseo",
        "dfs-login",
        "dfs-password-1234",
        True,
    )
    for page in ("/connections/", "/connections/acme/dataforseo/"):
        html = operator.get(page).content.decode()
        assert "dfs-password-1234" not in html and "dfs-login" not in html and "••••1234" in html
    entry = AuditEntry.objects.get()
    assert entry.action == "connection.create" and entry.selection["secrets_set"] == ["key", "secret"]
    assert "dfs-password" not in str(AuditEntry.objects.values().get())


def test_a_bad_connection_names_every_field_and_writes_nothing(operator: Client) -> None:
    refused = operator.post(
        "/connections/new/create/",
        {"kind": "salesforce", "tenant": "initech", "base_url": "ftp://x", "key": "", "secret": "", "options": "[1]"},
    )
    assert refused.status_code == 400
    assert set(refused.context["form"].errors) == {"tenant", "base_url", "key", "secret", "options"}
    assert operator.get("/connections/new/?kind=hubspot").status_code == 404
    assert not Connection.objects.exists() and not AuditEntry.objects.exists()


def _edit(operator: Client, row: Connection, **fields: str) -> Any:
    data = {
        "version": connection_version(row),
        "base_url": row.base_url,
        "options": "{}",
        "enabled": "on",
        "key": "",
        "secret": "",
        "webhook_key": "",
    } | fields
    return operator.post(f"/connections/{row.tenant}/{row.kind}/save/", data)


def test_an_edit_keeps_an_empty_secret_and_a_stale_tab_is_refused(operator: Client) -> None:
    row = connection_create(tenant="acme", kind="gong", key="gong-access-key-1", secret="gong-secret-value-1")
    page = operator.get("/connections/acme/gong/").content.decode()
    assert "Set, ends ••••ey-1" in page and "gong-access-key-1" not in page and 'name="version"' in page
    saved = _edit(operator, row, base_url="https://eu.api.gong.io")
    assert saved.status_code == 302
    fresh = Connection.objects.get()
    assert (fresh.base_url, fresh.key, fresh.secret) == (
        "https://eu.api.gong.io",
        "gong-access-key-1",
        "gong-secret-value-1",
    )
    stale = _edit(operator, row, secret="typed-in-an-old-tab")  # the version it was shown moved
    assert stale.status_code == 409 and "changed since you loaded it" in stale.content.decode()
    assert Connection.objects.get().secret == "gong-secret-value-1"
    disabled = operator.post("/connections/acme/gong/disable/", {"version": connection_version(row)})
    assert disabled.status_code == 409 and Connection.objects.get().enabled is True
    assert [e.action for e in AuditEntry.objects.order_by("id")] == ["connection.update"]


def test_disable_enable_and_delete_after_a_confirmation(operator: Client) -> None:
    row = connection_create(tenant="acme", kind="zenrows", secret="zr-key-000000001")
    assert operator.post("/connections/acme/zenrows/disable/", {"version": connection_version(row)}).status_code == 302
    row = Connection.objects.get()
    assert row.enabled is False
    assert operator.post("/connections/acme/zenrows/enable/", {"version": connection_version(row)}).status_code == 302
    row = Connection.objects.get()
    confirm = operator.get("/connections/acme/zenrows/delete/").content.decode()
    assert "erased for good" in confirm and "zr-key" not in confirm
    assert Connection.objects.exists()
    gone = operator.post("/connections/acme/zenrows/delete/run/", {"version": connection_version(row)})
    assert gone.status_code == 302 and not Connection.objects.exists()
    assert [e.action for e in AuditEntry.objects.order_by("id")] == [
        "connection.disable",
        "connection.enable",
        "connection.delete",
    ]


def test_test_connection_shows_and_keeps_the_outcome(operator: Client) -> None:
    with FakeDataForSEO() as dfs:
        connection_create(tenant="acme", kind="dataforseo", base_url=dfs.url, key="dfs-login", secret="dfs-password")
        tested = operator.post("/connections/acme/dataforseo/test/", follow=True)
        html = tested.content.decode()
        assert "Test connection: ok." in html and "balance 42.5 USD" in html and dfs.count() == 1
        connection_update(tenant="acme", kind="dataforseo", secret="not-the-password")
        failed = operator.post("/connections/acme/dataforseo/test/", follow=True).content.decode()
    assert "Test connection failed: DataForSEOAuthError" in failed and "not-the-password" not in failed
    row = Connection.objects.get()
    assert row.last_test_ok is False and row.last_tested_at is not None
    assert [e.action for e in AuditEntry.objects.order_by("id")] == ["connection.test", "connection.test"]


def test_the_list_shows_the_pull_cursor_of_a_pulled_connection(operator: Client) -> None:
    from datetime import timedelta

    from django.utils import timezone

    row = connection_create(tenant="acme", kind="salesforce", key="sf-client", secret="sf-secret")
    now = timezone.now()
    ConnectionCursor.objects.create(connection=row, cursor=now - timedelta(minutes=7), last_pull_at=now, updated_at=now)
    listing = operator.get("/connections/").content.decode().split('data-connection="acme/salesforce"')[1]
    assert "behind" in listing.split("</tr>")[0] and "last pull" in listing.split("</tr>")[0]


def test_a_viewer_and_a_stranger_can_do_nothing(viewer: Client, stranger: Client) -> None:
    row = connection_create(tenant="acme", kind="zenrows", secret="zr-key-000000001")
    version = connection_version(row)
    assert viewer.get("/connections/new/").status_code == 403
    assert "Viewing only" in viewer.get("/connections/acme/zenrows/").content.decode()
    for path in ("disable/", "test/", "delete/run/", "save/"):
        assert viewer.post(f"/connections/acme/zenrows/{path}", {"version": version}).status_code == 403
        assert stranger.post(f"/connections/acme/zenrows/{path}", {"version": version}).status_code == 404
    assert stranger.get("/connections/acme/zenrows/").status_code == 404
    assert "acme" not in stranger.get("/connections/").content.decode().split("<main")[-1]
    assert Connection.objects.get().enabled is True and not AuditEntry.objects.exists()


def test_an_ingress_credential_is_disabled_enabled_and_deleted(operator: Client, viewer: Client) -> None:
    route_upsert(name="orders", workflow="test-echo", tenant="acme")
    _, token, secret = ingress_secret_create(tenant="acme")

    def status() -> int:
        return int(signed_post(Client(), "orders", {"r": uuid.uuid4().hex}, token=token, secret=secret).status_code)

    assert viewer.post("/credentials/acme/default/disable/").status_code == 403
    assert operator.post("/credentials/acme/default/disable/").status_code == 302
    assert status() == 401
    assert operator.post("/credentials/acme/default/enable/").status_code == 302
    assert status() == 202
    confirm = operator.get("/credentials/acme/default/delete/").content.decode()
    assert "answer 401 from now on, for good" in confirm and IngressSecret.objects.exists()
    assert operator.post("/credentials/acme/default/delete/run/").status_code == 302
    assert not IngressSecret.objects.exists() and status() == 401
    assert [e.action for e in AuditEntry.objects.order_by("id")] == [
        "ingress_secret.disable",
        "ingress_secret.enable",
        "ingress_secret.delete",
    ]
