"""Bulk actions by query: the preview freezes what it counts, the confirm acts on exactly that
(even when the matching set moved), inside the user's acting tenants; an empty or unparsable
filter acts on nothing. The batch runs as a `runledger-batch` instance."""

from __future__ import annotations

import re

import pytest
from ledger_factories import make_instance

from dashboard.models import AuditEntry
from ingest.engine.models import Batch, BatchItem, History, Instance
from ingest.engine.worker.turns import run_until_idle

pytestmark = pytest.mark.db


@pytest.fixture
def running(users):
    for n in range(6):
        make_instance(f"r{n}", status="running" if n % 2 else "queued", workflow="gong-ingest")
    make_instance("done", status="complete", workflow="gong-ingest")
    make_instance("other-wf", status="running", workflow="salesforce-ingest")
    make_instance("viewer-only", status="running", workflow="gong-ingest", tenant="initech")


def _preview(client, query: str):
    r = client.get(f"/bulk-actions/?{query}")
    assert r.status_code == 302, r.content[:400]
    return r["Location"], int(re.search(r"/bulk-actions/(\d+)/", r["Location"]).group(1))


def _statuses() -> dict[str, str]:
    return dict(Instance.objects.values_list("id", "status"))


def test_a_preview_freezes_exactly_the_matching_instances_the_action_applies_to(operator, running):
    location, batch_id = _preview(operator, "action=terminate&workflow=gong-ingest")
    frozen = set(BatchItem.objects.filter(batch_id=batch_id).values_list("instance_id", flat=True))
    assert frozen == {f"r{n}" for n in range(6)}  # not the complete one, not another tenant's
    page = operator.get(location).content.decode()
    assert re.search(r'id="bulk-count">6<', page)
    assert "1 more matches but the action does not apply" in page


def test_the_preview_shows_its_filters_as_typed_not_url_encoded(operator, running):
    location, _ = _preview(operator, "action=pause&workflow=gong-ingest&q=r%3A1")
    page = operator.get(location).content.decode()
    query = re.search(r'id="bulk-query">([^<]*)<', page).group(1)
    assert "%3A" not in query and "workflow=gong-ingest" in query and "&amp;" not in query


def test_confirm_acts_on_the_previewed_set_only_when_the_set_changed_and_says_so(operator, running):
    _, batch_id = _preview(operator, "action=terminate&workflow=gong-ingest")
    make_instance("late", status="running", workflow="gong-ingest")  # matches now, was not previewed
    Instance.objects.filter(id="r0").update(status="complete")  # previewed, no longer matches
    page = operator.get(f"/bulk-actions/{batch_id}/").content.decode()
    assert "1 more match now" in page and "1 previewed no longer match" in page
    r = operator.post(
        f"/bulk-actions/{batch_id}/confirm/", {"reason": "stop the gong backlog", "rate_per_second": 1000}
    )
    assert r.status_code == 303
    run_until_idle(advance_clock=True)
    st = _statuses()
    assert [st[f"r{n}"] for n in range(1, 6)] == ["terminated"] * 5
    assert st["late"] == "running"  # never acted on: it was not in the preview
    assert st["r0"] == "complete"  # previewed, finished meanwhile: skipped, not changed
    assert st["viewer-only"] == "running" and st["other-wf"] == "running"
    item = BatchItem.objects.get(batch_id=batch_id, instance_id="r0")
    assert item.state == "skipped" and "complete" in item.detail
    batch = Batch.objects.get(id=batch_id)
    assert batch.state == "done"
    assert Instance.objects.get(id=f"batch-{batch_id}-acme").status == "complete"
    entry = AuditEntry.objects.get(action="instances.bulk_terminate")
    assert entry.selection["count"] == 6 and entry.selection["changed_since_preview"] == {"added": 1, "removed": 1}
    assert History.objects.filter(instance_id="r3", kind="operator", actor="operator").exists()


def test_a_confirmed_batch_cannot_be_confirmed_again(operator, running):
    _, batch_id = _preview(operator, "action=pause&workflow=gong-ingest")
    assert operator.post(f"/bulk-actions/{batch_id}/confirm/", {"reason": "r", "rate_per_second": 5}).status_code == 303
    again = operator.post(f"/bulk-actions/{batch_id}/confirm/", {"reason": "r", "rate_per_second": 5})
    assert again.status_code == 409
    assert Instance.objects.filter(workflow="runledger-batch").count() == 1


@pytest.mark.parametrize(
    "query",
    [
        "action=terminate",
        "action=terminate&status=runing",
        "action=terminate&attr=bad",
        "action=explode&workflow=gong-ingest",
    ],
)
def test_an_empty_or_unparsable_filter_acts_on_nothing(operator, running, query):
    r = operator.get(f"/bulk-actions/?{query}")
    assert r.status_code == 400
    assert "nothing was done" in r.content.decode() or "unknown bulk action" in r.content.decode()
    assert not Batch.objects.exists() and not BatchItem.objects.exists()


def test_a_viewer_cannot_preview_and_a_stranger_cannot_see_or_confirm_anothers_batch(
    viewer, stranger, operator, running
):
    assert viewer.get("/bulk-actions/?action=terminate&workflow=gong-ingest").status_code == 403
    _, batch_id = _preview(operator, "action=terminate&workflow=gong-ingest")
    assert stranger.get(f"/bulk-actions/{batch_id}/").status_code == 404
    assert stranger.post(f"/bulk-actions/{batch_id}/confirm/", {"reason": "x", "rate_per_second": 5}).status_code == 404
    assert _statuses()["r1"] == "running"


def test_a_stranger_previews_only_inside_its_own_tenant(stranger, running):
    _, batch_id = _preview(stranger, "action=terminate&workflow=gong-ingest")
    assert list(BatchItem.objects.filter(batch_id=batch_id).values_list("instance_id", flat=True)) == ["viewer-only"]


def test_retry_by_query_retries_the_errored_instances(operator, users):
    make_instance("e1", status="errored", workflow="gong-ingest")
    make_instance("e2", status="errored", workflow="gong-ingest")
    _, batch_id = _preview(operator, "action=retry&status=errored")
    operator.post(f"/bulk-actions/{batch_id}/confirm/", {"reason": "provider back", "rate_per_second": 100})
    run_until_idle(max_turns=3)  # the batch's turn; the retried instances' workflow is unknown here
    assert BatchItem.objects.filter(batch_id=batch_id, state="done").count() == 2
    assert History.objects.filter(instance_id="e1", kind="operator", data__action="retry").exists()


def test_the_api_previews_and_confirms_the_same_way(operator, running):
    from dashboard.models import Role
    from tests.api.conftest import persona

    api = persona("api-bulk", [("acme", Role.OPERATOR)])
    r = api.post("/api/bulk-actions/preview", {"action": "terminate", "query": "workflow=gong-ingest"})
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["count"] == 6
    make_instance("late", status="running", workflow="gong-ingest")
    r = api.post(f"/api/bulk-actions/{body['batch']}/confirm", {"reason": "stop", "rate_per_second": 500})
    assert r.status_code == 202, r.content
    assert r.json()["changed_since_preview"] == {"added": 1, "removed": 0}
    run_until_idle(advance_clock=True)
    got = api.get(f"/api/bulk-actions/{body['batch']}").json()
    assert got["progress"]["done"] == 6 and got["state"] == "done"
    assert _statuses()["late"] == "running"
    empty = api.post("/api/bulk-actions/preview", {"action": "terminate", "query": ""})
    assert empty.status_code == 400 and empty.json()["error"]["code"] == "bulk_refused"


def test_a_chunk_acts_on_each_item_of_a_group_alone_and_writes_every_outcome(users, monkeypatch):
    """One transaction per group of items: a refused item, an item that left the tenant and an
    item whose action fails halfway (after the instance row was written) each end alone; the
    others of the same group are acted on, and the failed one's writes are undone."""
    from django.utils import timezone

    from ingest.engine.services import base, batches

    for n in range(5):
        make_instance(f"g{n}", status="running")
    make_instance("finished", status="complete")
    batch = Batch.objects.create(
        action="pause",
        actor="op",
        user_id="1",
        query="status=running",
        tenants=["acme"],
        created_at=timezone.now(),
        state="running",
        reason="why",
    )
    ids = ["g0", "finished", "g1", "gone", "g2", "breaks", "g3", "g4"]
    make_instance("breaks", status="running")
    BatchItem.objects.bulk_create([BatchItem(batch=batch, instance_id=i, tenant="acme") for i in ids])
    real = base.status_history

    def status_history(inst, **kw):
        if inst.id == "breaks":
            raise RuntimeError("disk full")
        return real(inst, **kw)

    monkeypatch.setattr("ingest.engine.services.control.status_history", status_history)
    r = batches.batch_chunk(batch_id=batch.id, tenant="acme", rate_per_second=1000, sleep=lambda s: None)
    assert r == {"done": 5, "skipped": 2, "failed": 1, "remaining": 0}
    items = {i.instance_id: (i.state, i.detail) for i in BatchItem.objects.filter(batch=batch)}
    assert items["finished"][0] == "skipped" and "complete" in items["finished"][1]
    assert items["gone"] == ("skipped", "no longer in this tenant")
    assert items["breaks"] == ("failed", "RuntimeError: disk full")
    assert all(items[f"g{n}"] == ("done", "") for n in range(5))
    statuses = _statuses()
    assert [statuses[f"g{n}"] for n in range(5)] == ["paused"] * 5
    assert statuses["breaks"] == "running"  # its update was undone with its savepoint
    assert not History.objects.filter(instance_id="breaks", kind="operator").exists()
    assert History.objects.filter(instance_id="g3", kind="operator", reason__contains="why").count() == 1
    assert not BatchItem.objects.filter(batch=batch, done_at__isnull=True).exists()
