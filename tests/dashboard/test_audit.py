"""Every operator action in the dashboard writes exactly one audit entry (who, what, selection,
how many, when, from where), refused ones none; the Audit page lists them per tenant."""

from __future__ import annotations

import pytest
from ledger_factories import make_instance
from test_ops_factories import approval, failed_instance
from workflows_for_tests import DEMO

from dashboard.audit import Audit, Origin, audit_record
from dashboard.models import AuditEntry
from ingest.engine.models import Instance

pytestmark = pytest.mark.db

UA = {"HTTP_USER_AGENT": "pytest-browser/1.0", "REMOTE_ADDR": "10.1.2.3"}


def _only_entry() -> AuditEntry:
    entries = list(AuditEntry.objects.all())
    assert len(entries) == 1, [str(e) for e in entries]
    return entries[0]


@pytest.mark.parametrize(
    "action,status,data",
    [
        ("pause", "running", {}),
        ("terminate", "running", {"rollback": "on"}),
        ("retry", "errored", {}),
    ],
)
def test_an_instance_action_writes_one_entry_with_who_what_and_where(operator, action, status, data):
    inst = make_instance(f"acme-{action}", workflow=DEMO, status=status)
    r = operator.post(f"/instances/{inst.id}/actions/{action}/run/", {"reason": "on call", **data}, **UA)
    assert r.status_code == 303
    e = _only_entry()
    assert (e.actor, e.action, e.source, e.affected) == ("operator", f"instance.{action}", "web", 1)
    assert (e.ip, e.user_agent, e.reason, e.tenants) == ("10.1.2.3", "pytest-browser/1.0", "on call", ["acme"])
    assert e.selection["instance_id"] == inst.id
    assert e.user is not None and e.user.get_username() == "operator"
    if action == "terminate":
        assert e.selection["rollback"] is True


def test_a_refused_action_writes_no_entry(operator):
    inst = make_instance("acme-done", workflow=DEMO, status="complete")
    r = operator.post(f"/instances/{inst.id}/actions/pause/run/", {"reason": "x"})
    assert r.status_code == 409
    assert AuditEntry.objects.count() == 0
    assert operator.post(f"/instances/{inst.id}/actions/pause/run/", {"reason": ""}).status_code == 400
    assert AuditEntry.objects.count() == 0


def test_dead_letter_retry_discard_and_replay_each_write_one_entry(operator):
    a, b, c = (failed_instance(tenant="acme") for _ in range(3))
    operator.post(f"/dead-letters/{a.id}/retry/", {"reason": "r1"})
    operator.post(f"/dead-letters/{b.id}/discard/", {"reason": "r2"})
    operator.post(f"/dead-letters/{c.id}/replay/run/", {"params": '{"x": 1}', "reason": "r3", "confirm": "1"})
    got = sorted(AuditEntry.objects.values_list("action", "affected", "reason", "selection__dead_letter_id"))
    assert got == [
        ("dead_letter.discard", 1, "r2", b.id),
        ("dead_letter.replay", 1, "r3", c.id),
        ("dead_letter.retry", 1, "r1", a.id),
    ]


def test_a_bulk_redrive_writes_one_entry_counting_every_instance(operator):
    letters = [failed_instance(tenant=t) for t in ("acme", "acme", "globex")]
    token = operator.get(f"/dead-letters/redrive/?signature={letters[0].signature}").context["token"]
    operator.post("/dead-letters/redrive/run/", {"token": token, "rate_per_second": "5", "reason": "back"})
    e = _only_entry()
    assert (e.action, e.affected, e.tenants) == ("dead_letters.redrive", 3, ["acme", "globex"])
    assert e.selection == {"filter": {"state": "open", "signature": letters[0].signature}, "rate_per_second": 5.0}


def test_answering_an_approval_and_setting_a_budget_are_audited(operator):
    req = approval(tenant="acme")
    operator.post(f"/approvals/{req.id}/answer/", {"decision": "reject", "comment": "wrong account"})
    operator.post(
        "/budgets/save/", {"scope": "tenant", "key": "acme", "period": "day", "limit": "25.50", "policy": "approval"}
    )
    got = sorted(AuditEntry.objects.values_list("action", "reason"))
    assert got == [("approval.reject", "wrong account"), ("budget.set", "")]
    assert AuditEntry.objects.get(action="budget.set").selection["limit"] == "25.50"


def test_the_previous_history_rows_of_operator_actions_stay(operator):
    inst = make_instance("acme-h", workflow=DEMO, status="running")
    operator.post(f"/instances/{inst.id}/actions/pause/run/", {"reason": "keep history"})
    assert inst.history.filter(kind="operator", reason="keep history").count() == 1
    assert Instance.objects.get(id="acme-h").status in ("paused", "waitingForPause")


def _entry(action: str, tenants: list[str], actor_user=None) -> AuditEntry:
    return audit_record(user=actor_user, origin=Origin.cli(), audit=Audit(action, tenants, {"n": 1}), affected=1)


def test_the_audit_page_is_linked_and_shows_only_entries_of_the_users_tenants(operator, viewer, stranger):
    _entry("instance.pause", ["acme"])
    _entry("instance.retry", ["globex"])
    _entry("dead_letters.redrive", ["acme", "globex"])
    _entry("instance.terminate", ["initech"])
    _entry("budget.set", [])  # a global budget: staff only
    assert 'href="/audit/"' in operator.get("/").content.decode()

    def actions(client, query=""):
        r = client.get(f"/audit/{query}")
        assert r.status_code == 200
        return sorted(e.action for e in r.context["rows"])

    assert actions(operator) == ["dead_letters.redrive", "instance.pause", "instance.retry"]
    assert actions(viewer) == ["instance.pause"]  # acme only: the two-tenant redrive stays hidden
    assert actions(stranger) == ["instance.terminate"]
    assert actions(operator, "?tenant=globex") == ["dead_letters.redrive", "instance.retry"]
    assert actions(operator, "?action=instance.retry") == ["instance.retry"]
    assert actions(operator, "?source=web") == []
    assert actions(operator, "?tenant=initech") == []


def test_the_audit_page_paginates_newest_first(operator):
    for i in range(55):
        _entry(f"instance.pause-{i:02d}", ["acme"])
    first = operator.get("/audit/")
    rows = first.context["rows"]
    assert len(rows) == 50 and rows[0].action == "instance.pause-54"
    second = operator.get("/audit/" + first.context["next_url"])
    assert [e.action for e in second.context["rows"]] == [f"instance.pause-{i:02d}" for i in range(4, -1, -1)]
    assert second.context["next_url"] == ""
    html = first.content.decode()
    assert "instance.pause-54" in html and 'rel="next"' in html


def test_anonymous_users_are_sent_to_login(client):
    r = client.get("/audit/")
    assert r.status_code == 302 and "/login/" in r["Location"]
