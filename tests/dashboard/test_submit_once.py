"""An acting form is submitted once: the second submit of the same form (a double click, a resend,
the back button) acts zero times and shows what the first one did. Every acting form the console
renders carries the one-time token and every acting view honours it."""

from __future__ import annotations

import ast
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core import signing
from django.db import connection
from django.test import Client
from ledger_factories import make_instance
from test_ops_factories import failed_instance
from workflows_for_tests import DEMO

from dashboard import actions
from dashboard.access import demo_users_ensure
from dashboard.audit import Origin
from dashboard.models import AuditEntry, FormSubmission
from ingest.engine.models import DeadLetter, History, Instance
from ingest.triggers.models import ApiToken

pytestmark = pytest.mark.db
ROOT = Path(__file__).resolve().parents[2]
TOKEN = re.compile(r'name="submission" value="([^"]+)"')


def token_in(html: str) -> str:
    found = TOKEN.findall(html)
    assert found, "the form carries no submission token"
    return found[-1]


def test_a_double_submitted_replay_starts_one_instance_and_the_second_shows_the_first(operator):
    inst = make_instance("acme-twice", workflow=DEMO, status="errored", params={"account": "acme", "limit": 10})
    url = f"/instances/{inst.id}/actions/replay/run/"
    edited = json.dumps({"account": "acme", "limit": 5})
    preview = operator.post(url, {"reason": "smaller page", "params": edited})
    assert preview.status_code == 200  # the diff: nothing done, so its form carries a fresh token
    form = {
        "reason": "smaller page",
        "params": edited,
        "confirm": "True",
        "submission": token_in(preview.content.decode()),
    }
    first = operator.post(url, form)
    second = operator.post(url, form)
    replays = list(Instance.objects.filter(replay_of_id=inst.id).values_list("id", flat=True))
    assert replays == ["acme-twice-replay-1"]
    assert AuditEntry.objects.filter(action="instance.replay").count() == 1
    assert History.objects.filter(instance_id=inst.id, kind="operator", data__action="replay").count() == 1
    assert first.status_code == second.status_code == 303
    assert second["Location"] == first["Location"] == "/instances/acme-twice-replay-1/"
    shown = operator.get(second["Location"]).content.decode()
    assert "Replay started as acme-twice-replay-1" in shown  # the first submission's own message
    assert "already submitted" in shown and "not done again" in shown


def test_an_htmx_double_submit_gets_the_first_answers_client_redirect(operator):
    inst = make_instance("acme-htmx-twice", workflow=DEMO, status="queued")
    page = operator.get(f"/instances/{inst.id}/actions/pause/", headers={"HX-Request": "true"})
    form = {"reason": "outage", "submission": token_in(page.content.decode())}
    url = f"/instances/{inst.id}/actions/pause/run/"
    first = operator.post(url, form, headers={"HX-Request": "true"})
    second = operator.post(url, form, headers={"HX-Request": "true"})
    assert first["HX-Redirect"] == second["HX-Redirect"] == f"/instances/{inst.id}/"
    assert History.objects.filter(instance_id=inst.id, kind="operator").count() == 1
    assert AuditEntry.objects.filter(action="instance.pause").count() == 1


def test_a_duplicate_redrive_acts_once_writes_one_audit_row_and_shows_the_first_count(operator):
    dl = failed_instance(tenant="acme")
    preview = operator.get(f"/dead-letters/redrive/?signature={dl.signature}").content.decode()
    form = {
        "token": re.search(r'name="token" value="([^"]+)"', preview)[1],
        "reason": "provider back",
        "rate_per_second": "5",
        "submission": token_in(preview),
    }
    first = operator.post("/dead-letters/redrive/run/", form)
    second = operator.post("/dead-letters/redrive/run/", form)
    assert (first.status_code, second.status_code) == (302, 303)
    assert second["Location"] == first["Location"]
    entries = list(AuditEntry.objects.filter(action="dead_letters.redrive").values_list("affected", flat=True))
    assert entries == [1]  # no second entry, and none for 0 instances
    page = operator.get(second["Location"]).content.decode()
    assert "1 instance(s) queued" in page and "already submitted" in page
    assert DeadLetter.objects.get(pk=dl.pk).state == "redriven"


def test_a_redrive_that_finds_its_letters_resolved_meanwhile_does_nothing_and_audits_nothing(operator):
    from dashboard.dead_letter_actions import NothingToRedrive, dead_letters_redrive

    dl = failed_instance(tenant="acme")
    # Resolved between the selection's count and the engine's pass (another tab, another process).
    DeadLetter.objects.filter(pk=dl.pk).update(state="discarded")
    with pytest.raises(NothingToRedrive, match="redriven or discarded meanwhile"):
        dead_letters_redrive(
            user=get_user_model().objects.get(username="operator"),
            origin=Origin.cli(),
            ids=[dl.pk],
            scope=None,
            rate_per_second=5,
            reason="r",
            selection={"ids": [dl.pk]},
            tenants=["acme"],
        )
    assert not AuditEntry.objects.filter(action="dead_letters.redrive").exists()


def test_a_form_sent_back_with_an_error_returns_its_token_for_the_corrected_submit(operator):
    inst = make_instance("acme-fix", workflow=DEMO, status="queued")
    token = token_in(operator.get(f"/instances/{inst.id}/actions/pause/").content.decode())
    url = f"/instances/{inst.id}/actions/pause/run/"
    refused = operator.post(url, {"reason": " ", "submission": token})
    assert refused.status_code == 400 and not FormSubmission.objects.exists()
    done = operator.post(url, {"reason": "outage", "submission": token})
    assert done.status_code == 303 and Instance.objects.get(pk=inst.id).status == "paused"


def test_a_new_api_token_is_made_once_and_its_repeat_does_not_show_a_secret(operator):
    token = token_in(operator.get("/tokens/").content.decode())
    form = {"name": "laptop", "expires_days": "30", "submission": token}
    first = operator.post("/tokens/create/", form)
    assert first.status_code == 200 and "rla_" in first.content.decode()
    second = operator.post("/tokens/create/", form)
    assert second.status_code == 303 and second["Location"] == "/tokens/"
    assert ApiToken.objects.filter(name="laptop").count() == 1
    assert AuditEntry.objects.filter(action="api_token.create").count() == 1
    assert "already submitted" in operator.get("/tokens/").content.decode()


def test_a_discard_submitted_twice_discards_once_and_the_second_shows_the_first(operator):
    dl = failed_instance(tenant="acme")
    token = token_in(operator.get(f"/dead-letters/{dl.id}/").content.decode())
    form = {"reason": "test data", "submission": token}
    operator.post(f"/dead-letters/{dl.id}/discard/", form)
    page = operator.post(f"/dead-letters/{dl.id}/discard/", form, follow=True).content.decode()
    assert "Dead letter of" in page and "discarded." in page and "already submitted" in page
    assert "already discarded" not in page  # the engine was not asked a second time
    assert AuditEntry.objects.filter(action="dead_letter.discard").count() == 1


def test_a_token_this_console_did_not_make_or_made_for_another_form_acts_nothing(operator):
    inst = make_instance("acme-forged", workflow=DEMO, status="queued")
    url = f"/instances/{inst.id}/actions/pause/run/"
    forged = signing.TimestampSigner(salt="someone-else").sign("abc")
    r = operator.post(url, {"reason": "x", "submission": forged})
    assert r.status_code == 400 and "not one this console made" in r.content.decode()
    dl = failed_instance(tenant="acme")
    token = token_in(operator.get(f"/dead-letters/{dl.id}/").content.decode())
    assert operator.post(f"/dead-letters/{dl.id}/discard/", {"reason": "x", "submission": token}).status_code == 302
    r = operator.post(url, {"reason": "x", "submission": token})  # the discard's token, sent to a pause
    assert r.status_code == 409
    assert Instance.objects.get(pk=inst.id).status == "queued"


# ---- every acting form and view -----------------------------------------------------------

NOT_ACTING = {"templates/registration/login.html", "templates/base.html"}  # signing in and out


def test_every_acting_form_the_console_renders_carries_a_submission_token():
    missing = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        name = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        forms = re.findall(r"<form\b[^>]*method=\"post\".*?</form>", text, flags=re.S | re.I)
        missing += [name for form in forms if name not in NOT_ACTING and "{% submission_field %}" not in form]
    assert missing == []


def test_every_view_that_acts_on_a_post_is_submitted_once():
    unwrapped = []
    for path in sorted((ROOT / "dashboard" / "views").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            names = [ast.unparse(d) for d in node.decorator_list]
            if "require_POST" in names and not any(n.startswith("once(") for n in names):
                unwrapped.append(f"{path.name}:{node.name}")
    assert unwrapped == []


# ---- two submits at once, on two database connections ---------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_second_submit_that_arrives_while_the_first_acts_waits_for_it_and_shows_its_answer(
    require_postgres, transactional_db, monkeypatch
):
    demo_users_ensure()
    tabs = [Client(), Client()]
    for tab in tabs:
        assert tab.login(username="operator", password="operator")
    inst = make_instance("acme-at-once", workflow=DEMO, status="errored")
    form = {
        "reason": "provider back",
        "submission": token_in(tabs[0].get(f"/instances/{inst.id}/actions/retry/").content.decode()),
    }
    inside, go = threading.Event(), threading.Event()
    engine_call = actions._engine_call

    def held(*args, **kwargs):  # the first submit stays inside its transaction until told
        inside.set()
        assert go.wait(60)
        return engine_call(*args, **kwargs)

    monkeypatch.setattr(actions, "_engine_call", held)
    answers: dict[int, Any] = {}

    def submit(n: int) -> None:
        try:
            answers[n] = tabs[n].post(f"/instances/{inst.id}/actions/retry/run/", form)
        finally:
            connection.close()

    first = threading.Thread(target=submit, args=(0,))
    first.start()
    assert inside.wait(60)
    second = threading.Thread(target=submit, args=(1,))
    second.start()
    waiting = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    with connection.cursor() as cursor:  # the second waits on the first's claim of the token
        for _ in range(600):
            cursor.execute(waiting)
            if cursor.fetchone()[0]:
                break
            second.join(0.1)
        else:
            raise AssertionError("the second submit never waited for the first")
    go.set()
    first.join(60), second.join(60)
    assert answers[0].status_code == answers[1].status_code == 303
    assert answers[0]["Location"] == answers[1]["Location"] == f"/instances/{inst.id}/"
    assert History.objects.filter(instance_id=inst.id, kind="operator", data__action="retry").count() == 1
    assert AuditEntry.objects.filter(action="instance.retry").count() == 1
