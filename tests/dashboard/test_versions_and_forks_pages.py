"""Versions on the workflow page (counts, retire refused in place while an instance runs), and
the fork form on the instance page: validation errors in place, lineage on both pages."""

from __future__ import annotations

import pytest
from ledger_factories import make_instance
from workflows_for_tests import DEMO, DashDemo

from dashboard.models import AuditEntry
from ingest.engine.models import History, Instance, RetiredVersion, Step
from ingest.engine.worker.turns import run_until_idle

pytestmark = pytest.mark.db


def _ran(id: str, *, tenant: str = "acme", params: dict | None = None) -> Instance:
    made = make_instance(id, workflow=DEMO, tenant=tenant, status="queued", params=params or {"n": 1})
    Instance.objects.filter(id=id).update(ready_at=made.created_at, started_at=None)
    run_until_idle()
    inst = Instance.objects.get(id=id)
    assert inst.status == "complete"
    return inst


def test_the_workflow_page_lists_versions_with_counts_and_refuses_to_retire_a_running_one(operator, monkeypatch):
    make_instance("v1-done", workflow=DEMO, status="complete", workflow_version=1)
    make_instance("v1-running", workflow=DEMO, status="running", workflow_version=1)
    make_instance("v2-done", workflow=DEMO, status="complete", workflow_version=2)
    monkeypatch.setattr(DashDemo, "version", 2)
    page = operator.get(f"/workflows/{DEMO}/").content.decode()
    assert 'id="versions"' in page
    assert '<td class="mono">v1</td>' in page and '<td class="mono">v2</td>' in page
    assert "Retire v1" in page and "Retire v2" not in page and "<strong>current</strong>" in page
    r = operator.post(f"/workflows/{DEMO}/versions/1/retire/", {"reason": "moved on"})
    assert r.status_code == 409
    html = r.content.decode()
    assert "Version 1 was not retired" in html and "1 instance still runs on it (1 running)" in html
    assert not RetiredVersion.objects.exists() and not AuditEntry.objects.exists()
    Instance.objects.filter(id="v1-running").update(status="complete")
    r = operator.post(f"/workflows/{DEMO}/versions/1/retire/", {"reason": "moved on"})
    assert r.status_code == 303
    assert RetiredVersion.objects.get().retired_by == "operator"
    assert AuditEntry.objects.get().action == "workflow.version_retire"
    assert "retired" in operator.get(f"/workflows/{DEMO}/").content.decode()


def test_a_viewer_cannot_retire_and_sees_no_retire_button(viewer, monkeypatch):
    make_instance("v1-old", workflow=DEMO, status="complete", workflow_version=1)
    monkeypatch.setattr(DashDemo, "version", 2)
    assert "Retire v1" not in viewer.get(f"/workflows/{DEMO}/").content.decode()
    assert viewer.post(f"/workflows/{DEMO}/versions/1/retire/", {"reason": "x"}).status_code == 403
    assert not RetiredVersion.objects.exists()


def test_the_fork_form_shows_validation_errors_in_place_and_forks_nothing(operator):
    _ran("acme-fork-src")
    form = operator.get("/instances/acme-fork-src/actions/fork/").content.decode()
    assert '<option value="second">second</option>' in form and "Fork from step" in form
    r = operator.post("/instances/acme-fork-src/actions/fork/run/", {"from_step": "", "params": "[1, 2]", "reason": ""})
    assert r.status_code == 400
    html = r.content.decode()
    assert html.count("This field is required") == 2  # step and reason
    assert "params must be a JSON object" in html
    assert Instance.objects.count() == 1


def test_a_fork_from_the_page_starts_linked_both_ways_and_is_audited(operator):
    _ran("acme-fork-ok")
    r = operator.post(
        "/instances/acme-fork-ok/actions/fork/run/",
        {"from_step": "second", "params": '{"n": 7}', "reason": "rerun the second step"},
    )
    assert r.status_code == 303 and r["Location"] == "/instances/acme-fork-ok-fork-1/"
    fork = Instance.objects.get(id="acme-fork-ok-fork-1")
    assert (fork.fork_of_id, fork.fork_step, fork.params) == ("acme-fork-ok", "second", {"n": 7})
    assert list(Step.objects.filter(instance=fork).values_list("name", flat=True)) == ["first"]
    child_page = operator.get("/instances/acme-fork-ok-fork-1/").content.decode()
    assert child_page.count('copied by the fork, not run again">copied</span>') == 1  # "first" only
    assert (
        'id="lineage-fork-of"><a class="mono" href="/instances/acme-fork-ok/">acme-fork-ok</a> '
        "at step <code>second</code>" in child_page
    )
    origin_page = operator.get("/instances/acme-fork-ok/").content.decode()
    assert 'href="/instances/acme-fork-ok-fork-1/">acme-fork-ok-fork-1</a> from step <code>second</code>' in origin_page
    entry = AuditEntry.objects.get(action="instance.fork")
    # The same audit entry as the API writes for a fork: the params differ from the original's.
    assert entry.selection == {"instance_id": "acme-fork-ok", "from_step": "second", "edited": True}
    assert entry.tenants == ["acme"]
    assert History.objects.get(instance_id="acme-fork-ok", kind="operator").data["forked_as"] == fork.id


def test_a_viewer_cannot_fork_and_a_stranger_gets_404(viewer, stranger, operator):
    _ran("acme-fork-guard")
    ok = {"from_step": "second", "params": "{}", "reason": "x"}
    assert viewer.post("/instances/acme-fork-guard/actions/fork/run/", ok).status_code == 403
    assert stranger.post("/instances/acme-fork-guard/actions/fork/run/", ok).status_code == 404
    assert Instance.objects.count() == 1
