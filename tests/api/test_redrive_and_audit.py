"""The API's destructive actions never widen: an empty or missing selection is a 400, another
tenant's object a 404, a filter redrive acts on exactly its preview's set (409 when it changed);
every action writes one audit entry (source "api"); GET /api/audit is tenant-scoped."""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest
from django.utils import timezone

from dashboard.models import AuditEntry
from ingest.engine.models import DeadLetter, History, Instance
from ingest.engine.signature import error_signature
from tests.api.conftest import ApiClient

pytestmark = pytest.mark.db
_n = count(1)


def dead_letter(tenant: str = "acme", step: str = "llm-extract") -> DeadLetter:
    now, n = timezone.now(), next(_n)
    inst = Instance.objects.create(
        id=f"dl-{tenant}-{n}",
        workflow="test-echo",
        tenant=tenant,
        status="errored",
        params={},
        created_at=now,
        updated_at=now,
    )
    sig, normalized = error_signature(workflow="test-echo", step_name=step, error_name="Boom", message="boom")
    return DeadLetter.objects.create(
        instance=inst,
        workflow="test-echo",
        tenant=tenant,
        step_name=step,
        error_name="Boom",
        error_message="boom",
        signature=sig,
        normalized_message=normalized,
        created_at=now,
    )


def rows() -> tuple[Any, ...]:
    return (
        sorted(DeadLetter.objects.values_list("id", "state")),
        sorted(Instance.objects.values_list("id", "status")),
        History.objects.count(),
        AuditEntry.objects.count(),
    )


def code(r: Any) -> str:
    return str(r.json()["error"]["code"])


@pytest.mark.parametrize(
    "body",
    [
        {"reason": "r"},  # no selection at all
        {"ids": [], "reason": "r"},  # an empty id list
        {"ids": ["0"], "reason": "r"},  # not an id
    ],
)
def test_an_empty_or_invalid_selection_is_a_400_that_changes_no_row(operator: ApiClient, body: Any) -> None:
    dead_letter(), dead_letter()
    before = rows()
    r = operator.post("/api/dead-letters/redrive", body)
    assert r.status_code == 400 and "nothing was done" in r.json()["error"]["message"]
    assert rows() == before


@pytest.mark.parametrize("ids", [["abc"], [1, "abc"], ["1,abc"], [""]])
def test_ids_that_do_not_parse_are_a_400_naming_them(operator: ApiClient, ids: Any) -> None:
    a = dead_letter()
    before = rows()
    r = operator.post("/api/dead-letters/redrive", {"ids": [a.id if i == 1 else i for i in ids], "reason": "r"})
    assert r.status_code == 400 and code(r) == "invalid_selection"
    assert "not a positive integer" in r.json()["error"]["message"]
    assert rows() == before


def test_ids_redrive_exactly_those_and_write_one_audit_entry(operator: ApiClient) -> None:
    a, b, c = dead_letter(), dead_letter(), dead_letter()
    r = operator.post("/api/dead-letters/redrive", {"ids": [a.id, c.id], "reason": "fixed"})
    assert r.json() == {"redriven": 2}
    assert dict(DeadLetter.objects.values_list("id", "state")) == {a.id: "redriven", b.id: "open", c.id: "redriven"}
    e = AuditEntry.objects.get()
    assert (e.action, e.source, e.affected, e.actor, e.tenants) == ("dead_letters.redrive", "api", 2, "op", ["acme"])
    assert e.selection == {"ids": [a.id, c.id], "rate_per_second": 5.0}


def test_a_stranger_redriving_another_tenants_letter_gets_404(stranger: ApiClient) -> None:
    a = dead_letter("acme")
    before = rows()
    r = stranger.post("/api/dead-letters/redrive", {"ids": [a.id], "reason": "r"})
    assert r.status_code == 404 and code(r) == "dead_letter_not_found"
    r = stranger.post("/api/dead-letters/redrive/preview", {"filter": {"tenant": "acme"}})
    assert r.status_code == 404
    assert rows() == before


def test_a_filter_redrive_needs_its_preview_and_acts_on_exactly_its_set(operator: ApiClient) -> None:
    extract = [dead_letter(step="llm-extract") for _ in range(3)]
    other = dead_letter(step="persist")
    before = rows()
    r = operator.post("/api/dead-letters/redrive", {"filter": {"step_name": "llm-extract"}, "reason": "r"})
    assert r.status_code == 400 and code(r) == "preview_required" and rows() == before
    preview = operator.post("/api/dead-letters/redrive/preview", {"filter": {"step_name": "llm-extract"}}).json()
    assert preview["count"] == 3 and preview["ids"] == sorted(d.id for d in extract)
    wrong = operator.post(
        "/api/dead-letters/redrive", {"filter": {"step_name": "persist"}, "token": preview["token"], "reason": "r"}
    )
    assert wrong.status_code == 409 and code(wrong) == "token_mismatch" and rows() == before
    r = operator.post(
        "/api/dead-letters/redrive", {"filter": {"step_name": "llm-extract"}, "token": preview["token"], "reason": "r"}
    )
    assert r.json() == {"redriven": 3}
    assert DeadLetter.objects.get(id=other.id).state == "open"
    assert AuditEntry.objects.get().selection["filter"] == {"step_name": "llm-extract"}


def test_a_set_changed_since_the_preview_is_a_409_and_nothing_is_done(operator: ApiClient) -> None:
    dead_letter(), dead_letter()
    preview = operator.post("/api/dead-letters/redrive/preview", {"filter": {}}).json()
    dead_letter()  # arrives in between
    before = rows()
    r = operator.post("/api/dead-letters/redrive", {"filter": {}, "token": preview["token"], "reason": "r"})
    assert r.status_code == 409 and code(r) == "selection_changed"
    assert "1 added, 0 removed" in r.json()["error"]["message"]
    assert rows() == before


def test_a_stranger_acting_on_another_tenants_instance_gets_404(operator: ApiClient, stranger: ApiClient) -> None:
    assert (
        operator.post("/api/instances", {"workflow": "test-echo", "id": "mine-1", "tenant": "acme"}).status_code == 201
    )
    before = rows()
    for action in ("pause", "resume", "terminate", "restart", "retry", "replay"):
        r = stranger.post(f"/api/instances/mine-1/{action}", {"reason": "x"})
        assert r.status_code == 404 and code(r) == "instance_not_found", action
    assert rows() == before


def test_every_api_action_writes_exactly_one_entry(operator: ApiClient) -> None:
    assert operator.post("/api/instances", {"workflow": "test-echo", "id": "a-1", "tenant": "acme"}).status_code == 201
    operator.post("/api/instances/a-1/pause", {"reason": "look"})
    operator.post("/api/instances/a-1/resume", {})
    operator.post("/api/instances/a-1/terminate", {"rollback": False})
    operator.post("/api/instances/a-1/pause", {})  # refused (409): no entry
    operator.put("/api/budgets", {"scope": "tenant", "key": "acme", "period": "day", "limit": "3"})
    got = list(AuditEntry.objects.order_by("id").values_list("action", "affected", "source"))
    assert got == [
        ("instance.start", 1, "api"),
        ("instance.pause", 1, "api"),
        ("instance.resume", 1, "api"),
        ("instance.terminate", 1, "api"),
        ("budget.set", 1, "api"),
    ]
    assert AuditEntry.objects.get(action="instance.pause").reason == "look"


def test_the_audit_api_is_tenant_scoped_filterable_and_paginated(
    operator: ApiClient, stranger: ApiClient, viewer: ApiClient
) -> None:
    for i in range(3):
        operator.post("/api/instances", {"workflow": "test-echo", "id": f"p-{i}", "tenant": "acme"})
    stranger.post("/api/instances", {"workflow": "test-echo", "id": "s-1", "tenant": "initech"})
    mine = operator.get("/api/audit").json()
    assert [i["selection"]["instance_id"] for i in mine["items"]] == ["p-2", "p-1", "p-0"]
    assert mine["items"][0]["actor"] == "op" and mine["items"][0]["tenants"] == ["acme"]
    assert [i["selection"]["instance_id"] for i in stranger.get("/api/audit").json()["items"]] == ["s-1"]
    assert len(viewer.get("/api/audit").json()["items"]) == 3  # a viewer of acme reads acme's log
    page = operator.get("/api/audit", limit=2).json()
    assert len(page["items"]) == 2 and page["next_before"] is not None
    rest = operator.get("/api/audit", limit=2, before=page["next_before"]).json()
    assert [i["selection"]["instance_id"] for i in rest["items"]] == ["p-0"] and rest["next_before"] is None
    assert operator.get("/api/audit", action="instance.pause").json()["items"] == []
    assert operator.get("/api/audit", tenant="initech").json()["items"] == []
