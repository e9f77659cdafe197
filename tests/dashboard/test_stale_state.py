"""Every action checks the state its form was shown: a tab opened before another tab acted is
refused (409) with what changed, and nothing is done; a form whose instance only ran steps since
is not refused."""

from __future__ import annotations

import re

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from ledger_factories import add_history, make_instance
from test_ops_factories import failed_instance
from workflows_for_tests import DEMO

from dashboard.access import user_ensure
from dashboard.models import AuditEntry, Role
from ingest.engine.models import DeadLetter, History, Instance

pytestmark = pytest.mark.db
VERSION = re.compile(r'name="expected_version" value="(\d+)"')


@pytest.fixture
def alice(users) -> Client:
    user_ensure(username="alice", password="alice", memberships=[("acme", Role.OPERATOR)])
    client = Client()
    assert client.login(username="alice", password="alice")
    return client


def shown(client: Client, path: str) -> dict[str, str]:
    """The version and the form token a page renders."""
    html = client.get(path).content.decode()
    return {
        "expected_version": VERSION.findall(html)[0],
        "submission": re.findall(r'name="submission" value="([^"]+)"', html)[0],
    }


def test_a_stale_tab_cannot_retry_a_dead_letter_another_tab_discarded(operator, alice):
    dl = failed_instance(tenant="acme")
    tab_b = shown(operator, f"/dead-letters/{dl.id}/")  # opened first, left open
    assert alice.post(f"/dead-letters/{dl.id}/discard/", {"reason": "test data"}).status_code == 302
    r = operator.post(f"/dead-letters/{dl.id}/retry/", {**tab_b, "reason": "provider back"})
    assert r.status_code == 409
    html = r.content.decode()
    assert re.search(r"was discarded by alice at \d\d:\d\d:\d\d UTC", html) and "Nothing was done" in html
    assert "test data" in html  # the other tab's reason
    dl.refresh_from_db()
    assert (dl.state, dl.resolved_by) == ("discarded", "alice")
    assert Instance.objects.get(pk=dl.instance_id).status == "errored"  # not reopened by the stale retry
    assert list(AuditEntry.objects.values_list("action", "actor")) == [("dead_letter.discard", "alice")]


def test_a_stale_tab_cannot_discard_a_dead_letter_another_tab_retried(operator, alice):
    dl = failed_instance(tenant="acme")
    tab_b = shown(operator, f"/dead-letters/{dl.id}/")
    assert alice.post(f"/dead-letters/{dl.id}/retry/", {"reason": "provider back"}).status_code == 302
    r = operator.post(f"/dead-letters/{dl.id}/discard/", {**tab_b, "reason": "give up"})
    assert r.status_code == 409 and "was redriven by alice" in r.content.decode()
    assert DeadLetter.objects.get(pk=dl.pk).state == "redriven"
    assert not AuditEntry.objects.filter(action="dead_letter.discard").exists()


def test_a_dead_letter_form_of_the_current_state_acts(operator):
    dl = failed_instance(tenant="acme")
    fresh = shown(operator, f"/dead-letters/{dl.id}/")
    assert operator.post(f"/dead-letters/{dl.id}/discard/", {**fresh, "reason": "test data"}).status_code == 302
    assert DeadLetter.objects.get(pk=dl.pk).state == "discarded"


def test_a_stale_replay_of_a_dead_letter_is_refused_at_its_confirmation(operator, alice):
    dl = failed_instance(tenant="acme", workflow=DEMO)
    form = shown(operator, f"/dead-letters/{dl.id}/replay/")
    alice.post(f"/dead-letters/{dl.id}/discard/", {"reason": "not needed"})
    r = operator.post(f"/dead-letters/{dl.id}/replay/run/", {**form, "params": "{}", "reason": "x", "confirm": "1"})
    assert r.status_code == 409 and "discarded by alice" in r.content.decode()
    assert not Instance.objects.filter(replay_of_id=dl.instance_id).exists()


def test_an_instance_action_from_a_form_shown_before_another_operator_acted_is_refused(operator, alice):
    inst = make_instance("acme-stale", workflow=DEMO, status="queued")
    tab_b = shown(operator, f"/instances/{inst.id}/actions/terminate/")
    assert alice.post(f"/instances/{inst.id}/actions/pause/run/", {"reason": "outage"}).status_code == 303
    r = operator.post(f"/instances/{inst.id}/actions/terminate/run/", {**tab_b, "reason": "bad input"})
    assert r.status_code == 409
    html = r.content.decode()
    assert re.search(r"alice paused it at \d\d:\d\d:\d\d UTC", html) and "It is now paused" in html
    assert Instance.objects.get(pk=inst.id).status == "paused"
    assert list(AuditEntry.objects.values_list("action", flat=True)) == ["instance.pause"]
    # The answer shows the form as it is now: confirming it again acts on that, deliberately.
    again = {
        "expected_version": VERSION.findall(html)[0],
        "reason": "bad input",
        "submission": re.findall(r'name="submission" value="([^"]+)"', html)[0],
    }
    assert again["expected_version"] != tab_b["expected_version"]
    assert operator.post(f"/instances/{inst.id}/actions/terminate/run/", again).status_code == 303
    assert Instance.objects.get(pk=inst.id).status == "terminated"


def test_an_instance_that_ended_since_the_form_was_shown_is_refused_with_how_it_ended(operator):
    inst = make_instance("acme-ended", workflow=DEMO, status="running")
    tab = shown(operator, f"/instances/{inst.id}/actions/restart/")
    Instance.objects.filter(pk=inst.id).update(status="errored")
    add_history(inst, "instance.status", status="errored")
    r = operator.post(f"/instances/{inst.id}/actions/restart/run/", {**tab, "reason": "again"})
    assert r.status_code == 409 and re.search(r"it errored at \d\d:\d\d:\d\d UTC", r.content.decode())
    assert not History.objects.filter(instance_id=inst.id, kind="operator").exists()


def test_steps_that_ran_since_the_form_was_shown_do_not_make_it_stale(operator):
    inst = make_instance("acme-busy", workflow=DEMO, status="running")
    tab = shown(operator, f"/instances/{inst.id}/actions/pause/")
    for kind, status in (("step.completed", ""), ("instance.status", "waiting"), ("instance.status", "running")):
        add_history(inst, kind, status=status, step_name="first")
    assert operator.post(f"/instances/{inst.id}/actions/pause/run/", {**tab, "reason": "outage"}).status_code == 303
    assert Instance.objects.get(pk=inst.id).status in {"paused", "waitingForPause"}


def test_the_command_line_refuses_a_stale_version_too(operator, alice):
    dl = failed_instance(tenant="acme")
    seen = shown(operator, f"/dead-letters/{dl.id}/")["expected_version"]
    alice.post(f"/dead-letters/{dl.id}/retry/", {"reason": "provider back"})
    with pytest.raises(CommandError, match="was redriven by alice"):
        call_command("operate", "--as", "operator", "discard", str(dl.id), "--reason", "x", "--expected-version", seen)
    inst = make_instance("acme-cli-stale", workflow=DEMO, status="queued")
    seen = shown(operator, f"/instances/{inst.id}/actions/pause/")["expected_version"]
    alice.post(f"/instances/{inst.id}/actions/pause/run/", {"reason": "outage"})
    with pytest.raises(CommandError, match="alice paused it"):
        call_command(
            "operate", "--as", "operator", "instance", "resume", inst.id, "--reason", "x", "--expected-version", seen
        )
    assert Instance.objects.get(pk=inst.id).status == "paused"
