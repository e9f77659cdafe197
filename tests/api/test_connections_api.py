"""Source connections over the REST API: created, read (secrets only as set and masked), edited
(an empty secret keeps the stored one), enabled, disabled, tested against a fake and deleted;
every wrong field named at once in a JSON error and nothing written on a refusal; a stale version
refused with 409; audited as "api" without secrets; the personas' sides. Ingress credentials are
disabled, enabled and deleted over the API too."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client

from dashboard.models import AuditEntry
from ingest.pipelines.models import Connection
from ingest.triggers.models import IngressSecret
from ingest.triggers.services import ingress_secret_create, route_upsert
from tests.api.conftest import ApiClient
from tests.fakes import FakeZenRows
from tests.triggers.support import signed_post

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def patch(api: ApiClient, path: str, body: Any) -> Any:
    return api.client.patch(path, body, content_type="application/json", headers=api.headers)


def delete(api: ApiClient, path: str) -> Any:
    return api.client.delete(path, headers=api.headers)


def test_a_connection_is_created_read_edited_tested_and_deleted(operator: ApiClient) -> None:
    with FakeZenRows() as zr:
        made = operator.post(
            "/api/connections", {"tenant": "acme", "kind": "zenrows", "secret": "zr-key", "base_url": f"{zr.url}/v1/"}
        )
        assert made.status_code == 201, made.content
        body = made.json()
        assert body["secrets"] == [{"name": "secret", "set": True, "ends": "••••"}]
        assert "zr-key" not in made.content.decode()
        version = body["version"]
        edited = patch(
            operator,
            "/api/connections/acme/zenrows",
            {"secret": "", "options": {"reconcile": False}, "version": version},
        )
        assert edited.status_code == 200 and Connection.objects.get().secret == "zr-key"
        stale = patch(operator, "/api/connections/acme/zenrows", {"secret": "x" * 20, "version": version})
        assert stale.status_code == 409 and stale.json()["error"]["code"] == "connection_changed"
        tested = operator.post("/api/connections/acme/zenrows/test")
        assert tested.status_code == 200 and tested.json()["ok"] is True and zr.count() == 1
    read = operator.get("/api/connections/acme/zenrows").json()
    assert read["last_test_ok"] is True and read["options"] == {"reconcile": False}
    disabled = operator.post(f"/api/connections/acme/zenrows/disable?version={read['version']}")
    assert disabled.status_code == 200 and disabled.json()["enabled"] is False
    gone = delete(operator, "/api/connections/acme/zenrows")
    assert gone.status_code == 200 and gone.json() == {"tenant": "acme", "kind": "zenrows", "deleted": True}
    assert not Connection.objects.exists()
    actions = [e.action for e in AuditEntry.objects.order_by("id")]
    assert actions == [
        "connection.create",
        "connection.update",
        "connection.test",
        "connection.disable",
        "connection.delete",
    ]
    assert {e.source for e in AuditEntry.objects.all()} == {"api"}
    assert "zr-key" not in str(list(AuditEntry.objects.values()))


def test_every_wrong_field_is_named_at_once_in_json_and_nothing_is_written(operator: ApiClient) -> None:
    refused = operator.post(
        "/api/connections",
        {
            "tenant": "acme",
            "kind": "gong",
            "base_url": "nope",
            "key": "",
            "provider": "openai",
            "options": {"reconcile": 1},
        },
    )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "invalid_connection"
    assert set(error["fields"]) == {"base_url", "key", "secret", "provider", "options"}
    unknown = operator.post("/api/connections", {"tenant": "acme", "kind": "gong", "colour": "blue"})
    assert unknown.status_code == 422 and unknown.json()["error"]["code"]
    bad_kind = operator.post("/api/connections", {"tenant": "acme", "kind": "hubspot"})
    assert bad_kind.status_code == 400 and "kind" in bad_kind.json()["error"]["fields"]
    nulls = operator.post("/api/connections", {"tenant": "acme", "kind": "zenrows", "secret": None})
    assert nulls.status_code == 400 and "secret" in nulls.json()["error"]["fields"]
    assert not Connection.objects.exists() and not AuditEntry.objects.exists()
    operator.post("/api/connections", {"tenant": "acme", "kind": "zenrows", "secret": "zr-key"})
    again = operator.post("/api/connections", {"tenant": "acme", "kind": "zenrows", "secret": "zr-key-2"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "connection_exists"
    nothing = patch(operator, "/api/connections/acme/zenrows", {})
    assert nothing.status_code == 400 and nothing.json()["error"]["code"] == "nothing_to_change"
    assert operator.post("/api/connections/acme/zenrows/disable?version=abc").status_code == 400
    assert Connection.objects.get().secret == "zr-key" and Connection.objects.get().enabled is True


def test_the_personas_sides(operator: ApiClient, viewer: ApiClient, stranger: ApiClient) -> None:
    operator.post("/api/connections", {"tenant": "acme", "kind": "zenrows", "secret": "zr-key"})
    assert [c["kind"] for c in viewer.get("/api/connections").json()] == ["zenrows"]
    assert stranger.get("/api/connections").json() == []
    for path in ("/api/connections/acme/zenrows/disable", "/api/connections/acme/zenrows/test"):
        assert viewer.post(path).status_code == 403
        assert stranger.post(path).status_code == 404
    assert viewer.post("/api/connections", {"tenant": "acme", "kind": "gong"}).status_code == 403
    assert stranger.get("/api/connections/acme/zenrows").status_code == 404
    assert delete(stranger, "/api/connections/acme/zenrows").status_code == 404
    assert Connection.objects.get().enabled is True and AuditEntry.objects.count() == 1


def test_an_ingress_credential_is_disabled_enabled_and_deleted(operator: ApiClient, viewer: ApiClient) -> None:
    route_upsert(name="orders", workflow="test-echo", tenant="acme")
    _, token, secret = ingress_secret_create(tenant="acme")

    def status() -> int:
        return int(signed_post(Client(), "orders", {"r": uuid.uuid4().hex}, token=token, secret=secret).status_code)

    assert viewer.post("/api/ingress-credentials/acme/default/disable").status_code == 403
    off = operator.post("/api/ingress-credentials/acme/default/disable")
    assert off.status_code == 200 and off.json()["enabled"] is False and status() == 401
    assert operator.post("/api/ingress-credentials/acme/default/enable").json()["enabled"] is True
    assert status() == 202
    assert delete(operator, "/api/ingress-credentials/acme/nope").status_code == 404
    gone = delete(operator, "/api/ingress-credentials/acme/default")
    assert gone.status_code == 200 and gone.json()["deleted"] is True
    assert not IngressSecret.objects.exists() and status() == 401
    assert [e.action for e in AuditEntry.objects.order_by("id")] == [
        "ingress_secret.disable",
        "ingress_secret.enable",
        "ingress_secret.delete",
    ]
