"""Operator actions go through the engine's services with who and why; engine refusals are
shown as messages (409), never as a server error."""

from __future__ import annotations

import json

import pytest
from ledger_factories import make_instance
from workflows_for_tests import DEMO

from ingest.engine.models import History, Instance, PendingEvent

pytestmark = pytest.mark.db


def _run(client, inst, action, **data):
    return client.post(f"/instances/{inst.id}/actions/{action}/run/", data)


def test_pause_records_who_and_why_and_redirects_to_the_instance(operator):
    inst = make_instance("acme-pause", workflow=DEMO, status="queued")
    r = _run(operator, inst, "pause", reason="provider outage")
    assert r.status_code == 303 and r["Location"] == "/instances/acme-pause/"
    assert Instance.objects.get(id="acme-pause").status == "paused"
    h = History.objects.get(instance_id="acme-pause", kind="operator")
    assert (h.actor, h.reason, h.data["action"]) == ("operator", "provider outage", "pause")
    page = operator.get("/instances/acme-pause/").content.decode()
    assert "provider outage" in page and "requested for acme-pause" in page


def test_a_reason_is_required_and_nothing_happens_without_one(operator):
    inst = make_instance("acme-noreason", workflow=DEMO, status="queued")
    r = _run(operator, inst, "pause", reason="  ")
    assert r.status_code == 400
    assert "This field is required" in r.content.decode()
    assert Instance.objects.get(id="acme-noreason").status == "queued"
    assert not History.objects.filter(kind="operator").exists()


def test_an_engine_refusal_is_shown_as_a_message_not_a_500(operator):
    inst = make_instance("acme-done", workflow=DEMO, status="complete")
    r = _run(operator, inst, "pause", reason="oops")
    assert r.status_code == 409
    html = r.content.decode()
    assert "The engine refused" in html and "acme-done" in html and "complete" in html
    assert Instance.objects.get(id="acme-done").status == "complete"


def test_retry_is_refused_for_an_instance_that_did_not_error(operator):
    inst = make_instance("acme-running", workflow=DEMO, status="running")
    r = _run(operator, inst, "retry", reason="try")
    assert r.status_code == 409 and "only errored instances can be retried" in r.content.decode()


def test_retry_requeues_an_errored_instance(operator):
    inst = make_instance("acme-err", workflow=DEMO, status="errored", error_name="TimeoutError")
    assert _run(operator, inst, "retry", reason="provider back").status_code == 303
    assert Instance.objects.get(id="acme-err").status == "queued"
    assert History.objects.filter(
        instance_id="acme-err", kind="operator", actor="operator", reason="provider back"
    ).exists()


def test_terminate_with_rollback_passes_the_choice_to_the_engine(operator):
    inst = make_instance("acme-term", workflow=DEMO, status="queued")
    assert _run(operator, inst, "terminate", reason="bad input", rollback="on").status_code == 303
    h = History.objects.get(instance_id="acme-term", kind="operator")
    assert h.data["action"] == "terminate" and h.reason == "bad input"
    assert h.data.get("rollback") is True or Instance.objects.get(id="acme-term").control == "terminate_rollback"


def test_replay_shows_a_diff_first_then_creates_a_linked_instance(operator):
    inst = make_instance("acme-src", workflow=DEMO, status="errored", params={"account": "acme", "limit": 10})
    edited = json.dumps({"account": "acme", "limit": 50})
    preview = _run(operator, inst, "replay", reason="bigger page", params=edited)
    assert preview.status_code == 200
    html = preview.content.decode()
    assert '<div class="del">-  &quot;limit&quot;: 10</div>' in html
    assert '<div class="add">+  &quot;limit&quot;: 50</div>' in html
    assert Instance.objects.count() == 1  # nothing ran yet
    done = _run(operator, inst, "replay", reason="bigger page", params=edited, confirm="True")
    assert done.status_code == 303
    new = Instance.objects.get(replay_of_id="acme-src")
    assert done["Location"] == f"/instances/{new.id}/"
    assert new.params == {"account": "acme", "limit": 50} and new.tenant == "acme"
    assert History.objects.filter(instance_id="acme-src", kind="operator", data__action="replay").exists()
    # lineage on both pages
    assert new.id in operator.get("/instances/acme-src/").content.decode()
    assert "acme-src" in operator.get(f"/instances/{new.id}/").content.decode()


def test_replay_rejects_params_that_are_not_a_json_object(operator):
    inst = make_instance("acme-src2", workflow=DEMO, status="errored")
    r = _run(operator, inst, "replay", reason="x", params="[1, 2")
    assert r.status_code == 400 and "not valid JSON" in r.content.decode()
    r = _run(operator, inst, "replay", reason="x", params="[1, 2]", confirm="True")
    assert r.status_code == 400 and "must be a JSON object" in r.content.decode()
    assert Instance.objects.count() == 1


def test_send_event_delivers_the_payload(operator):
    inst = make_instance("acme-wait", workflow=DEMO, status="waiting")
    r = _run(operator, inst, "event", reason="manual approval", type="approval", payload='{"approved": true}')
    assert r.status_code == 303
    ev = PendingEvent.objects.get(instance_id="acme-wait")
    assert (ev.type, ev.payload, ev.sender) == ("approval", {"approved": True}, "operator")


def test_restart_offers_the_runs_steps_and_restarts_from_the_chosen_one(operator):
    from ledger_factories import make_run

    inst = make_instance("acme-restart", workflow=DEMO, status="errored")
    make_run(inst)
    form = operator.get("/instances/acme-restart/actions/restart/").content.decode()
    assert '<option value="llm-extract-1">' in form and "from scratch" in form
    r = _run(operator, inst, "restart", reason="reprocess", from_step="llm-extract-1")
    assert r.status_code == 303
    h = History.objects.get(instance_id="acme-restart", kind="operator")
    assert h.data["action"] == "restart" and h.reason == "reprocess"
    assert Instance.objects.get(id="acme-restart").status == "queued"


def test_the_confirmation_renders_as_a_dialog_fragment_for_htmx(operator):
    inst = make_instance("acme-dlg", workflow=DEMO, status="running")
    r = operator.get(f"/instances/{inst.id}/actions/terminate/", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 200 and "<html" not in html
    assert 'action="/instances/acme-dlg/actions/terminate/run/"' in html and "csrfmiddlewaretoken" in html
