"""The concurrency limits page: what each persona sees, setting and removing a tenant's limit
(audited, once per submission, refused when it moved since the page showed it), and every wrong
field named."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from ledger_factories import make_instance

from dashboard.models import AuditEntry
from ingest.engine.models import ConcurrencyLimit
from ingest.engine.services.limits import concurrency_limit_set, limit_version

pytestmark = pytest.mark.db
TOKEN = re.compile(r'name="submission" value="([^"]+)"')


def shown(response) -> set[str]:
    return set(re.findall(r'data-limit="([^"]+)"', response.content.decode()))


def fresh_token(client) -> str:
    return TOKEN.findall(client.get("/limits/").content.decode())[-1]


@pytest.fixture
def busy(db) -> None:
    soon = timezone.now() + timedelta(minutes=5)
    for n in range(3):  # three of acme's gong ingests hold a live lease, two wait
        make_instance(
            f"gong-acme-run-{n}",
            tenant="acme",
            concurrency_key="acme",
            lease_owner="w1",
            lease_expires_at=soon,
            ready_at=timezone.now(),
        )
    for n in range(2):
        make_instance(
            f"gong-acme-wait-{n}",
            tenant="acme",
            concurrency_key="acme",
            status="queued",
            ready_at=timezone.now() - timedelta(seconds=1),
        )
    make_instance(
        "gong-initech-1", tenant="initech", concurrency_key="initech", lease_owner="w1", lease_expires_at=soon
    )


def test_members_see_their_tenants_rows_with_what_runs_and_waits_now(busy, operator, viewer, stranger):
    concurrency_limit_set(workflow="gong-ingest", key="acme", max_concurrent=4, actor="ann")
    page = operator.get("/limits/")
    assert page.status_code == 200 and shown(page) == {"gong-ingest/acme"}
    row = re.search(r'<tr data-limit="gong-ingest/acme"[^>]*>.*?</tr>', page.content.decode(), re.S).group(0)
    assert 'data-running="3"' in row and 'data-cap="4"' in row and "3 / 4" in row and "by ann" in row
    assert '<td class="num">2</td>' in row  # waiting
    assert shown(viewer.get("/limits/")) == {"gong-ingest/acme"}
    assert "read only" in viewer.get("/limits/").content.decode()
    assert shown(stranger.get("/limits/")) == {"gong-ingest/initech"}


def test_an_operator_sets_changes_and_removes_a_limit_each_audited(operator):
    r = operator.post(
        "/limits/save/",
        {"workflow": "gong-ingest", "tenant": "acme", "max_concurrent": "6", "submission": fresh_token(operator)},
    )
    assert r.status_code == 302
    row = ConcurrencyLimit.objects.get()
    assert (row.workflow, row.key, row.max_concurrent, row.updated_by) == ("gong-ingest", "acme", 6, "operator")
    r = operator.post(
        "/limits/save/",
        {
            "workflow": "gong-ingest",
            "tenant": "acme",
            "max_concurrent": "2",
            "version": limit_version(row),
            "submission": fresh_token(operator),
        },
    )
    assert r.status_code == 302 and ConcurrencyLimit.objects.get().max_concurrent == 2
    r = operator.post(
        "/limits/remove/",
        {
            "workflow": "gong-ingest",
            "tenant": "acme",
            "version": limit_version(ConcurrencyLimit.objects.get()),
            "submission": fresh_token(operator),
        },
    )
    assert r.status_code == 302 and not ConcurrencyLimit.objects.exists()
    assert list(AuditEntry.objects.order_by("id").values_list("action", "tenants")) == [
        ("limit.set", ["acme"]),
        ("limit.set", ["acme"]),
        ("limit.remove", ["acme"]),
    ]
    assert AuditEntry.objects.order_by("id").first().selection == {
        "workflow": "gong-ingest",
        "tenant": "acme",
        "max_concurrent": 6,
    }


def test_a_double_submitted_form_sets_the_limit_once(operator):
    form = {"workflow": "gong-ingest", "tenant": "acme", "max_concurrent": "6", "submission": fresh_token(operator)}
    first, second = operator.post("/limits/save/", form), operator.post("/limits/save/", form)
    assert (first.status_code, second.status_code) == (302, 303)  # the repeat shows what the first did
    assert first["Location"] == second["Location"] == "/limits/"
    assert AuditEntry.objects.filter(action="limit.set").count() == 1 and ConcurrencyLimit.objects.count() == 1


def test_every_wrong_field_is_named_and_nothing_changes(operator):
    r = operator.post("/limits/save/", {"workflow": "nope", "tenant": "acme", "max_concurrent": "0"})
    text = r.content.decode()
    assert r.status_code == 400
    assert "workflow: Select a valid choice" in text and "max concurrent: Ensure this value is greater" in text
    r = operator.post("/limits/save/", {"workflow": "gong-ingest", "tenant": "", "max_concurrent": "x"})
    assert r.status_code == 400 and "tenant: This field is required" in r.content.decode()
    assert "max concurrent: Enter a whole number" in r.content.decode()
    assert not ConcurrencyLimit.objects.exists() and not AuditEntry.objects.exists()


def test_a_limit_changed_since_the_page_showed_it_is_refused_with_409(operator):
    row = concurrency_limit_set(workflow="gong-ingest", key="acme", max_concurrent=3, actor="ann")
    shown_version = limit_version(row)
    concurrency_limit_set(workflow="gong-ingest", key="acme", max_concurrent=5, actor="bob")
    r = operator.post(
        "/limits/save/", {"workflow": "gong-ingest", "tenant": "acme", "max_concurrent": "9", "version": shown_version}
    )
    assert r.status_code == 409 and "set to 5 by bob" in r.content.decode()
    new = operator.post("/limits/save/", {"workflow": "gong-ingest", "tenant": "acme", "max_concurrent": "9"})
    assert new.status_code == 409  # the "set a limit" form never overwrites a limit it did not show
    r = operator.post("/limits/remove/", {"workflow": "gong-ingest", "tenant": "acme", "version": shown_version})
    assert r.status_code == 409
    assert ConcurrencyLimit.objects.get().max_concurrent == 5 and not AuditEntry.objects.exists()


def test_viewers_and_strangers_cannot_set_or_remove_and_nothing_changes(viewer, stranger):
    concurrency_limit_set(workflow="gong-ingest", key="acme", max_concurrent=3, actor="ann")
    version = limit_version(ConcurrencyLimit.objects.get())
    assert (
        viewer.post(
            "/limits/save/", {"workflow": "gong-ingest", "tenant": "acme", "max_concurrent": "9", "version": version}
        ).status_code
        == 403
    )
    refused = stranger.post(
        "/limits/save/", {"workflow": "gong-ingest", "tenant": "acme", "max_concurrent": "9", "version": version}
    )
    assert refused.status_code == 400 and "tenant: Select a valid choice" in refused.content.decode()
    for client in (viewer, stranger):
        r = client.post("/limits/remove/", {"workflow": "gong-ingest", "tenant": "acme", "version": version})
        assert r.status_code == 403
    assert ConcurrencyLimit.objects.get().max_concurrent == 3 and not AuditEntry.objects.exists()
