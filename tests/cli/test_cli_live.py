"""The `runledger` CLI against a live test server over HTTP, with API tokens of the three personas:
tables, tail to the end, retry, replay, terminate, redrive (preview then confirm), and the API's
refusals printed with a non-zero status and no row changed."""

from __future__ import annotations

import io
import threading
import time
from typing import Any

import pytest
from django.utils import timezone
from rich.console import Console

from dashboard.access import user_ensure
from dashboard.cli import main
from dashboard.models import AuditEntry, Role
from ingest.engine.models import DeadLetter, Instance
from ingest.engine.services import instances as engine_services
from ingest.engine.signature import error_signature
from ingest.engine.worker.turns import run_until_idle
from ingest.triggers.services import api_token_create
from tests.triggers import support  # noqa: F401  (registers test-echo)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def _token(username: str, memberships: list[tuple[str, str]]) -> str:
    user = user_ensure(username=username, password="pw-" + username, memberships=memberships)
    return api_token_create(user=user, name=f"{username}-cli")[1]


@pytest.fixture
def tokens(transactional_db: Any) -> dict[str, str]:
    return {
        "operator": _token("cli-op", [("acme", Role.OPERATOR)]),
        "viewer": _token("cli-view", [("acme", Role.VIEWER)]),
        "stranger": _token("cli-strange", [("initech", Role.OPERATOR)]),
    }


def run(live_server: Any, token: str, *argv: str) -> tuple[int, str]:
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=200, force_terminal=False, color_system=None, soft_wrap=True
    )  # a message is one line, however long: asserts read it whole
    code = main(["--url", live_server.url, "--token", token, *argv], console=console)
    return code, buffer.getvalue()


def errored(instance_id: str, tenant: str = "acme") -> DeadLetter:
    now = timezone.now()
    inst = Instance.objects.create(
        id=instance_id,
        workflow="test-echo",
        tenant=tenant,
        status="errored",
        params={"n": 1},
        created_at=now,
        updated_at=now,
        error_name="Boom",
        error_message="boom",
    )
    sig, normalized = error_signature(workflow="test-echo", step_name="echo", error_name="Boom", message="boom")
    return DeadLetter.objects.create(
        instance=inst,
        workflow="test-echo",
        tenant=tenant,
        step_name="echo",
        error_name="Boom",
        error_message="boom",
        signature=sig,
        normalized_message=normalized,
        created_at=now,
    )


def test_list_and_show_print_tables_of_the_tokens_tenants_only(live_server: Any, tokens: dict[str, str]) -> None:
    engine_services.instance_create(workflow="test-echo", id="cli-acme-1", params={"a": 1}, tenant="acme")
    engine_services.instance_create(workflow="test-echo", id="cli-initech-1", params={}, tenant="initech")
    run_until_idle()
    code, out = run(live_server, tokens["viewer"], "list")
    assert code == 0 and "cli-acme-1" in out and "cli-initech-1" not in out and "complete" in out
    code, out = run(live_server, tokens["viewer"], "show", "cli-acme-1")
    assert code == 0 and "echo" in out and '"got"' in out
    code, out = run(live_server, tokens["operator"], "show", "cli-initech-1")
    assert code == 1 and "instance_not_found" in out and "HTTP 404" in out


def test_tail_follows_an_instance_to_its_end_with_its_history(live_server: Any, tokens: dict[str, str]) -> None:
    engine_services.instance_create(workflow="test-echo", id="cli-tail-1", params={}, tenant="acme")
    done = threading.Event()

    def work() -> None:  # the worker, a little after the tail has started following
        time.sleep(0.8)
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            run_until_idle()
            if Instance.objects.get(pk="cli-tail-1").status == "complete":
                return
            time.sleep(0.1)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    try:
        # A tail that did not see the end would give up after its --timeout and say so.
        code, out = run(live_server, tokens["viewer"], "tail", "cli-tail-1", "--interval", "0.2", "--timeout", "90")
    finally:
        done.set()
        worker.join(timeout=60)  # before the test's rows are flushed under it
    assert code == 0, out
    assert "ended complete" in out and "echo" in out
    assert "1 step(s) done" in out


def test_an_operator_retries_replays_and_terminates_each_audited(live_server: Any, tokens: dict[str, str]) -> None:
    errored("cli-err-1")
    code, out = run(live_server, tokens["operator"], "retry", "cli-err-1", "--reason", "provider back")
    assert code == 0 and Instance.objects.get(pk="cli-err-1").status != "errored"
    code, out = run(
        live_server, tokens["operator"], "replay", "cli-err-1", "--reason", "edited", "--params", '{"n": 2}'
    )
    replay = Instance.objects.get(replay_of_id="cli-err-1")
    assert code == 0 and replay.id in out and replay.params == {"n": 2}
    code, out = run(live_server, tokens["operator"], "terminate", replay.id, "--reason", "not needed")
    assert code == 0 and Instance.objects.get(pk=replay.id).status == "terminated"
    assert list(AuditEntry.objects.order_by("id").values_list("action", "source")) == [
        ("instance.retry", "api"),
        ("instance.replay", "api"),
        ("instance.terminate", "api"),
    ]


def test_a_viewer_and_a_stranger_are_refused_and_nothing_changes(live_server: Any, tokens: dict[str, str]) -> None:
    errored("cli-err-2")
    code, out = run(live_server, tokens["viewer"], "retry", "cli-err-2", "--reason", "x")
    assert code == 1 and "forbidden" in out
    code, out = run(live_server, tokens["stranger"], "terminate", "cli-err-2", "--reason", "x")
    assert code == 1 and "HTTP 404" in out
    code, out = run(live_server, tokens["operator"], "replay", "cli-err-2", "--reason", "x", "--params", "{bad")
    assert code == 2 and "not valid JSON" in out
    code, out = run(live_server, "rla_not-a-token", "list")
    assert code == 1 and "not_authenticated" in out
    assert Instance.objects.get(pk="cli-err-2").status == "errored" and not AuditEntry.objects.exists()


def test_redrive_previews_then_acts_on_exactly_that_set(live_server: Any, tokens: dict[str, str]) -> None:
    letters = [errored(f"cli-dl-{n}") for n in range(3)]
    errored("cli-dl-initech", tenant="initech")
    code, out = run(live_server, tokens["operator"], "redrive", "--workflow", "test-echo", "--reason", "fixed")
    assert code == 0 and "3 open dead letter(s)" in out and "nothing was done" in out
    assert DeadLetter.objects.filter(state="open").count() == 4
    code, out = run(
        live_server,
        tokens["operator"],
        "redrive",
        "--workflow",
        "test-echo",
        "--reason",
        "fixed",
        "--rate",
        "50",
        "--yes",
    )
    assert code == 0 and "redriven: 3" in out
    assert set(DeadLetter.objects.filter(state="open").values_list("instance_id", flat=True)) == {"cli-dl-initech"}
    assert {d.pk for d in letters}.isdisjoint(DeadLetter.objects.filter(state="open").values_list("pk", flat=True))
    code, out = run(live_server, tokens["operator"], "redrive", "--reason", "no selection")
    assert code == 2 and "name the selection" in out


def test_start_runs_a_workflow_with_those_params_in_the_named_tenant(live_server: Any, tokens: dict[str, str]) -> None:
    code, out = run(
        live_server,
        tokens["operator"],
        "start",
        "test-echo",
        "--params",
        '{"n": 3}',
        "--id",
        "cli-start-1",
        "--tenant",
        "acme",
        "--priority",
        "5",
    )
    assert code == 0 and "started cli-start-1" in out and "tenant acme" in out, out
    inst = Instance.objects.get(pk="cli-start-1")
    assert (inst.workflow, inst.tenant, inst.params, inst.priority) == ("test-echo", "acme", {"n": 3}, 5)
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.source, entry.actor, entry.selection) == (
        "instance.start",
        "api",
        "cli-op",
        {"workflow": "test-echo", "instance_id": "cli-start-1"},
    )
    code, out = run(
        live_server,
        tokens["operator"],
        "start",
        "test-echo",
        "--params",
        "{}",
        "--id",
        "cli-start-1",
        "--tenant",
        "acme",
    )
    assert code == 1 and "HTTP 409" in out and "already exists" in out


def test_start_sets_search_attributes_and_a_start_time(live_server: Any, tokens: dict[str, str]) -> None:
    from ingest.engine.models import InstanceAttributes

    code, out = run(
        live_server,
        tokens["operator"],
        "start",
        "test-echo",
        "--params",
        "{}",
        "--tenant",
        "acme",
        "--id",
        "cli-tagged",
        "--attr",
        "customer=acme",
        "--attr",
        "wave=3",
        "--start-at",
        "2030-01-02T03:04:05Z",
    )
    assert code == 0 and "started cli-tagged" in out, out
    assert InstanceAttributes.objects.get(instance_id="cli-tagged").attributes == {"customer": "acme", "wave": "3"}
    assert Instance.objects.get(pk="cli-tagged").ready_at.isoformat() == "2030-01-02T03:04:05+00:00"
    code, out = run(live_server, tokens["operator"], "list", "--attr", "customer:acme")
    assert code == 0 and "cli-tagged" in out, out
    code, out = run(
        live_server,
        tokens["operator"],
        "start",
        "test-echo",
        "--params",
        "{}",
        "--tenant",
        "acme",
        "--attr",
        "nokey",
        "--attr",
        "=x",
    )
    assert code == 2 and "'nokey' is not key=value" in out and "'=x' is not key=value" in out, out
    code, out = run(
        live_server,
        tokens["operator"],
        "start",
        "test-echo",
        "--params",
        "{}",
        "--tenant",
        "acme",
        "--attr",
        "Bad Key=x",
    )
    assert code == 1 and "HTTP 422" in out, out
    assert Instance.objects.count() == 1


def test_start_refuses_bad_params_a_viewer_and_a_tenant_not_the_tokens(
    live_server: Any, tokens: dict[str, str]
) -> None:
    code, out = run(live_server, tokens["operator"], "start", "test-echo", "--params", "{bad", "--tenant", "acme")
    assert code == 2 and "--params is not valid JSON" in out
    code, out = run(live_server, tokens["operator"], "start", "test-echo", "--params", "[1]", "--tenant", "acme")
    assert code == 2 and "must be a JSON object" in out
    code, out = run(live_server, tokens["viewer"], "start", "test-echo", "--params", "{}", "--tenant", "acme")
    assert code == 1 and "forbidden" in out and "HTTP 403" in out
    code, out = run(live_server, tokens["operator"], "start", "test-echo", "--params", "{}", "--tenant", "initech")
    assert code == 1 and "tenant_not_found" in out and "HTTP 404" in out
    assert not Instance.objects.exists() and not AuditEntry.objects.exists()
