"""Connections' credentials: encrypted in their columns, write-only in the admin, webhook keys
found by their hash, and the Salesforce access token kept across a restart."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from dashboard.access import user_ensure
from dashboard.models import Role
from ingest.pipelines.models import Connection
from ingest.pipelines.selectors import connection_by_webhook_key
from ingest.pipelines.services import connection_upsert
from ingest.workflows import salesforce as sf_workflow
from tests.fakes.salesforce import TOKEN_ROUTE, FakeSalesforce

pytestmark = pytest.mark.django_db


def raw(column: str, pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM ingest_connection WHERE id = %s", [pk])
        return str(cursor.fetchone()[0])


def test_credentials_are_stored_as_tokens_and_read_back_in_clear() -> None:
    row = connection_upsert(
        tenant="acme",
        kind="salesforce",
        key="client-1",
        secret="s3cret-value",
        options={"refresh_token": "refresh-value", "organization_id": "00D1"},
        webhook_key="hook-value",
    )
    for column, clear in (
        ("key", "client-1"),
        ("secret", "s3cret-value"),
        ("refresh_token", "refresh-value"),
        ("webhook_key", "hook-value"),
    ):
        stored = raw(column, row.pk)
        assert stored.startswith("enc:") and clear not in stored
    assert "refresh-value" not in raw("options", row.pk)  # moved out of the plain JSON
    fresh = Connection.objects.get(pk=row.pk)
    assert (fresh.key, fresh.secret, fresh.refresh_token, fresh.webhook_key) == (
        "client-1",
        "s3cret-value",
        "refresh-value",
        "hook-value",
    )
    assert fresh.options == {"organization_id": "00D1"}


def test_a_webhook_key_is_found_by_its_hash_and_a_wrong_one_finds_nothing() -> None:
    row = connection_upsert(tenant="acme", kind="gong", webhook_key="hook-acme-1")
    assert len(raw("webhook_key_hash", row.pk)) == 64
    found = connection_by_webhook_key(kind="gong", key="hook-acme-1")
    assert found is not None and found.pk == row.pk
    assert connection_by_webhook_key(kind="gong", key="hook-acme-2") is None
    assert connection_by_webhook_key(kind="salesforce", key="hook-acme-1") is None


@pytest.fixture
def staff(db: Any) -> Client:
    user = user_ensure(username="root", password="pw-root", memberships=[("acme", Role.ADMIN)], staff=True)
    user.is_superuser = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


def _form(row: Connection, **changes: str) -> dict[str, str]:
    data = {
        "tenant": row.tenant,
        "kind": row.kind,
        "base_url": row.base_url,
        "options": "{}",
        "enabled": "on",
        "key": "",
        "secret": "",
        "refresh_token": "",
        "webhook_key": "",
    }
    return {**data, **changes}


def test_the_admin_shows_secrets_masked_and_an_empty_field_keeps_them(staff: Client) -> None:
    row = connection_upsert(
        tenant="acme", kind="gong", key="access-key-0001", secret="very-secret-abcd", webhook_key="hook-acme-wxyz"
    )
    page = staff.get(f"/admin/ingest/connection/{row.pk}/change/").content.decode()
    assert "••••abcd" in page and "••••wxyz" in page
    assert "very-secret-abcd" not in page and "hook-acme-wxyz" not in page and "access-key-0001" not in page

    response = staff.post(f"/admin/ingest/connection/{row.pk}/change/", _form(row, base_url="http://gong.local"))
    assert response.status_code == 302, response.content.decode()[:2000]
    kept = Connection.objects.get(pk=row.pk)
    assert (kept.base_url, kept.key, kept.secret, kept.webhook_key) == (
        "http://gong.local",
        "access-key-0001",
        "very-secret-abcd",
        "hook-acme-wxyz",
    )

    staff.post(
        f"/admin/ingest/connection/{row.pk}/change/", _form(row, secret="replaced-secret", webhook_key="hook-new")
    )
    changed = Connection.objects.get(pk=row.pk)
    assert (changed.secret, changed.key, changed.webhook_key) == ("replaced-secret", "access-key-0001", "hook-new")
    assert connection_by_webhook_key(kind="gong", key="hook-new") is not None
    assert connection_by_webhook_key(kind="gong", key="hook-acme-wxyz") is None


def test_the_admin_shows_an_ingress_hmac_secret_masked(staff: Client) -> None:
    from ingest.triggers.services import ingress_secret_create

    row, _, hmac_secret = ingress_secret_create(tenant="acme")
    page = staff.get(f"/admin/triggers/ingresssecret/{row.pk}/change/").content.decode()
    assert "••••" + hmac_secret[-4:] in page and hmac_secret not in page
    with connection.cursor() as cursor:
        cursor.execute("SELECT hmac_secret FROM triggers_ingresssecret WHERE id = %s", [row.pk])
        stored = cursor.fetchone()[0]
    assert stored.startswith("enc:") and hmac_secret not in stored


def test_a_restarted_process_reuses_the_kept_salesforce_token(
    sfdc_tenant: str, fake_salesforce: FakeSalesforce
) -> None:
    opp = fake_salesforce.opportunities[0]
    sf_workflow._clients.clear()
    sf_workflow.fetch_record(tenant=sfdc_tenant, object_type="Opportunity", object_id=opp.id)
    assert len(fake_salesforce.requests_to(TOKEN_ROUTE)) == 1
    row = Connection.objects.get(tenant=sfdc_tenant, kind="salesforce")
    assert row.access_token and row.instance_url and row.access_token_expires_at > timezone.now()
    assert raw("access_token", row.pk).startswith("enc:")

    sf_workflow._clients.clear()  # what a restart loses
    sf_workflow.fetch_record(tenant=sfdc_tenant, object_type="Opportunity", object_id=opp.id)
    assert len(fake_salesforce.requests_to(TOKEN_ROUTE)) == 1

    Connection.objects.filter(pk=row.pk).update(access_token_expires_at=timezone.now() - timedelta(seconds=1))
    sf_workflow._clients.clear()
    sf_workflow.fetch_record(tenant=sfdc_tenant, object_type="Opportunity", object_id=opp.id)
    assert len(fake_salesforce.requests_to(TOKEN_ROUTE)) == 2
    sf_workflow._clients.clear()


def test_a_refresh_token_typed_into_the_admin_options_is_moved_to_its_encrypted_column(staff: Client) -> None:
    row = connection_upsert(tenant="acme", kind="salesforce", key="client-1", secret="client-secret-1")
    staff.post(
        f"/admin/ingest/connection/{row.pk}/change/",
        _form(row, options='{"refresh_token": "typed-refresh", "organization_id": "00D"}'),
    )
    saved = Connection.objects.get(pk=row.pk)
    assert saved.refresh_token == "typed-refresh" and saved.options == {"organization_id": "00D"}
    assert "typed-refresh" not in raw("options", row.pk) and "typed-refresh" not in raw("refresh_token", row.pk)
