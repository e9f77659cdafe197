"""/api/limits: list with what runs now, set and remove a tenant's limit (operators of the tenant,
audited, refused on a moved version), every wrong field named; errors are the JSON envelope."""

from __future__ import annotations

import pytest

from dashboard.models import AuditEntry
from ingest.engine.models import ConcurrencyLimit

pytestmark = pytest.mark.db


def test_an_operator_sets_lists_and_removes_a_limit(operator, viewer, stranger):
    put = operator.put(
        "/api/limits", {"workflow": "gong-ingest", "tenant": "acme", "max_concurrent": 4, "version": "0"}
    )
    assert put.status_code == 200, put.content
    body = put.json()
    assert (body["max_concurrent"], body["source"], body["running"], body["updated_by"]) == (4, "console", 0, "api:op")
    assert [(r["workflow"], r["tenant"]) for r in viewer.get("/api/limits").json()] == [("gong-ingest", "acme")]
    assert stranger.get("/api/limits").json() == []
    moved = operator.put(
        "/api/limits", {"workflow": "gong-ingest", "tenant": "acme", "max_concurrent": 9, "version": "0"}
    )
    assert moved.status_code == 409 and moved.json()["error"]["code"] == "concurrency_limit_changed"
    gone = operator.client.delete(f"/api/limits/gong-ingest/acme?version={body['version']}", headers=operator.headers)
    assert gone.status_code == 200 and gone.json() == {"removed": 1}
    again = operator.client.delete("/api/limits/gong-ingest/acme", headers=operator.headers)
    assert again.status_code == 404 and again.json()["error"]["code"] == "concurrency_limit_not_found"
    assert list(AuditEntry.objects.order_by("id").values_list("action", "source")) == [
        ("limit.set", "api"),
        ("limit.remove", "api"),
    ]


def test_every_wrong_field_is_named_and_no_row_changes(operator):
    r = operator.put("/api/limits", {"workflow": "nope", "tenant": " acme", "max_concurrent": 0})
    assert r.status_code == 404  # a tenant the caller cannot see is refused before the fields
    r = operator.put("/api/limits", {"workflow": "nope", "tenant": "acme", "max_concurrent": 0})
    assert r.status_code == 422
    assert set(r.json()["error"]["fields"]) == {"workflow", "max_concurrent"}
    r = operator.put("/api/limits", {"workflow": "gong-ingest", "tenant": "acme", "max_concurrent": "many"})
    assert r.status_code == 422 and "max_concurrent" in r.content.decode()
    assert not ConcurrencyLimit.objects.exists() and not AuditEntry.objects.exists()


def test_viewers_and_strangers_cannot_set_or_remove(operator, viewer, stranger):
    assert (
        viewer.put("/api/limits", {"workflow": "gong-ingest", "tenant": "acme", "max_concurrent": 2}).status_code == 403
    )
    assert (
        stranger.put("/api/limits", {"workflow": "gong-ingest", "tenant": "acme", "max_concurrent": 2}).status_code
        == 404
    )
    operator.put("/api/limits", {"workflow": "gong-ingest", "tenant": "acme", "max_concurrent": 2})
    assert viewer.client.delete("/api/limits/gong-ingest/acme", headers=viewer.headers).status_code == 403
    assert ConcurrencyLimit.objects.get().max_concurrent == 2
