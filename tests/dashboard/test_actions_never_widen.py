"""Destructive actions never widen: an empty or unparsable selection is a 400 that changes
nothing; a bulk redrive acts on exactly the set its preview counted, inside the user's tenants
and the list's filters; another tenant's object is a 404. Rows are counted before and after."""

from __future__ import annotations

import re

import pytest
from ledger_factories import make_instance
from test_ops_factories import failed_instance
from workflows_for_tests import DEMO

from dashboard.models import AuditEntry
from ingest.engine.models import DeadLetter, History, Instance

pytestmark = pytest.mark.db


def _snapshot():
    """Everything a redrive or an action could change."""
    return (
        sorted(DeadLetter.objects.values_list("id", "state")),
        sorted(Instance.objects.values_list("id", "status", "ready_at")),
        History.objects.count(),
        AuditEntry.objects.count(),
    )


def _letters(n: int, **kw):
    return [failed_instance(**kw) for _ in range(n)]


@pytest.mark.parametrize("ids", [["abc"], [""], ["1,abc"], ["-1"], ["0"], ["1e3"]])
def test_a_redrive_run_with_empty_or_unparsable_ids_is_a_400_that_changes_no_row(operator, ids):
    _letters(3, tenant="acme")
    before = _snapshot()
    r = operator.post("/dead-letters/redrive/run/", {"ids": ids, "rate_per_second": "5", "reason": "r"})
    assert r.status_code == 400
    assert "nothing was done" in r.content.decode()
    assert _snapshot() == before


@pytest.mark.parametrize("query", ["ids=abc", "ids=", "ids=1,abc", "mode=ids"])
def test_a_redrive_preview_of_an_empty_or_unparsable_selection_is_a_400(operator, query):
    _letters(2, tenant="acme")
    r = operator.get(f"/dead-letters/redrive/?{query}")
    assert r.status_code == 400
    assert 'id="redrive-error"' in r.content.decode()
    assert "token" not in r.context


def test_a_run_without_the_previews_token_or_with_a_forged_one_acts_on_nothing(operator):
    _letters(2, tenant="acme")
    before = _snapshot()
    assert operator.post("/dead-letters/redrive/run/", {"rate_per_second": "5", "reason": "r"}).status_code == 400
    r = operator.post("/dead-letters/redrive/run/", {"token": "x:y:z", "rate_per_second": "5", "reason": "r"})
    assert r.status_code == 400 and "invalid" in r.content.decode()
    assert _snapshot() == before


def test_another_users_token_is_refused(operator, users):
    from django.test import Client

    from dashboard.access import user_ensure

    _letters(2, tenant="acme")
    token = operator.get("/dead-letters/redrive/").context["token"]
    user_ensure(username="other-op", password="pw", memberships=[("acme", "operator")])
    other = Client()
    assert other.login(username="other-op", password="pw")
    before = _snapshot()
    r = other.post("/dead-letters/redrive/run/", {"token": token, "rate_per_second": "5", "reason": "r"})
    assert r.status_code == 400 and _snapshot() == before


def test_a_group_redrive_with_filters_acts_on_exactly_the_previews_count(operator):
    # One signature, four open letters in acme, two in globex; the list is filtered to acme.
    acme = _letters(4, tenant="acme")
    globex = _letters(2, tenant="globex")
    signature = acme[0].signature
    listing = operator.get("/dead-letters/?tenant=acme&state=open").content.decode()
    group_link = re.search(r'href="(/dead-letters/redrive/\?[^"]*signature=[^"]*)"', listing).group(1)
    assert "tenant=acme" in group_link  # the group's Redrive… keeps the list's filters
    preview = operator.get(f"/dead-letters/redrive/?tenant=acme&state=open&signature={signature}")
    assert preview.context["estimate"].instances == 4
    r = operator.post(
        "/dead-letters/redrive/run/",
        {"token": preview.context["token"], "rate_per_second": "5", "reason": "provider back"},
    )
    assert r.status_code == 302
    states = dict(DeadLetter.objects.values_list("id", "state"))
    assert [states[d.id] for d in acme] == ["redriven"] * 4
    assert [states[d.id] for d in globex] == ["open"] * 2
    entry = AuditEntry.objects.get()
    assert entry.affected == 4 and entry.tenants == ["acme"]
    assert entry.selection["filter"] == {"state": "open", "tenant": "acme", "signature": signature}


def test_the_confirm_uses_the_previews_filter_not_form_fields_sent_beside_it(operator):
    acme = _letters(2, tenant="acme")
    globex = _letters(2, tenant="globex")
    token = operator.get(f"/dead-letters/redrive/?tenant=acme&signature={acme[0].signature}").context["token"]
    operator.post(
        "/dead-letters/redrive/run/",
        {"token": token, "tenant": "", "signature": "", "rate_per_second": "5", "reason": "r"},
    )
    assert DeadLetter.objects.filter(id__in=[d.id for d in globex], state="open").count() == 2
    assert DeadLetter.objects.filter(id__in=[d.id for d in acme], state="redriven").count() == 2


def test_a_set_changed_between_preview_and_confirm_is_not_acted_on_and_says_how(operator):
    acme = _letters(3, tenant="acme")
    preview = operator.get(f"/dead-letters/redrive/?signature={acme[0].signature}")
    assert preview.context["estimate"].instances == 3
    failed_instance(tenant="acme")  # a fourth arrives while the operator reads the preview
    before = _snapshot()
    r = operator.post(
        "/dead-letters/redrive/run/", {"token": preview.context["token"], "rate_per_second": "5", "reason": "r"}
    )
    assert r.status_code == 409
    assert _snapshot() == before
    html = r.content.decode()
    assert "changed since the preview: 1 added, 0 removed" in html
    assert 'id="redrive-count">4<' in html  # asks again with the new count and a new token
    again = operator.post(
        "/dead-letters/redrive/run/", {"token": r.context["token"], "rate_per_second": "5", "reason": "r"}
    )
    assert again.status_code == 302
    assert DeadLetter.objects.filter(state="redriven").count() == 4


def test_a_letter_resolved_between_preview_and_confirm_is_reported_as_removed(operator):
    acme = _letters(3, tenant="acme")
    token = operator.get(f"/dead-letters/redrive/?signature={acme[0].signature}").context["token"]
    DeadLetter.objects.filter(id=acme[1].id).update(state="discarded")
    r = operator.post("/dead-letters/redrive/run/", {"token": token, "rate_per_second": "5", "reason": "r"})
    assert r.status_code == 409 and "0 added, 1 removed" in r.content.decode()
    assert DeadLetter.objects.filter(state="redriven").count() == 0


def test_selected_items_are_redriven_and_only_them(operator):
    acme = _letters(3, tenant="acme")
    token = operator.get(f"/dead-letters/redrive/?mode=ids&ids={acme[0].id}&ids={acme[2].id}").context["token"]
    operator.post("/dead-letters/redrive/run/", {"token": token, "rate_per_second": "5", "reason": "r"})
    assert dict(DeadLetter.objects.values_list("id", "state")) == {
        acme[0].id: "redriven",
        acme[1].id: "open",
        acme[2].id: "redriven",
    }
    assert AuditEntry.objects.get().selection["ids"] == [acme[0].id, acme[2].id]


def test_a_stranger_redriving_another_tenants_dead_letter_gets_404_and_nothing_changes(stranger, operator):
    acme = _letters(2, tenant="acme")
    before = _snapshot()
    assert stranger.get(f"/dead-letters/redrive/?ids={acme[0].id}").status_code == 404
    assert stranger.get("/dead-letters/redrive/?tenant=acme").status_code == 404
    token = operator.get(f"/dead-letters/redrive/?ids={acme[0].id}").context["token"]
    assert (
        stranger.post("/dead-letters/redrive/run/", {"token": token, "rate_per_second": "5", "reason": "r"}).status_code
        == 400
    )
    for path in (
        f"/dead-letters/{acme[0].id}/retry/",
        f"/dead-letters/{acme[0].id}/discard/",
        f"/dead-letters/{acme[0].id}/replay/run/",
    ):
        assert stranger.post(path, {"reason": "r", "params": "{}", "confirm": "1"}).status_code == 404
    assert _snapshot() == before


def test_a_stranger_acting_on_another_tenants_instance_gets_404_and_nothing_changes(stranger):
    inst = make_instance("acme-x", workflow=DEMO, status="running")
    before = _snapshot()
    for action in ("pause", "terminate", "restart", "retry", "resume"):
        r = stranger.post(f"/instances/{inst.id}/actions/{action}/run/", {"reason": "r"})
        assert r.status_code == 404, action
    assert _snapshot() == before


def test_a_viewer_cannot_redrive_even_with_an_operators_token(viewer, operator):
    acme = _letters(1, tenant="acme")
    token = operator.get(f"/dead-letters/redrive/?ids={acme[0].id}").context["token"]
    before = _snapshot()
    assert (
        viewer.post("/dead-letters/redrive/run/", {"token": token, "rate_per_second": "5", "reason": "r"}).status_code
        == 403
    )
    assert _snapshot() == before
