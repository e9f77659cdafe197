"""Every interface acts on an instance through `dashboard.actions`: the console, the REST API and
`manage.py operate` refuse the same bad input with the same message, and change no row."""

from __future__ import annotations

import html
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from ledger_factories import make_instance
from workflows_for_tests import DEMO

from dashboard import actions
from dashboard.access import user_ensure
from dashboard.audit import Origin
from dashboard.models import AuditEntry, Role
from ingest.engine.models import History, Instance
from ingest.triggers.services import api_token_create

pytestmark = pytest.mark.db


def _person(username: str, memberships: list[tuple[str, str]]) -> Any:
    return user_ensure(username=username, password=username, memberships=memberships)


@pytest.fixture
def people(db: Any) -> dict[str, Any]:
    """An operator of acme; a viewer of acme who operates globex (so the console's page-level
    check lets them through to the per-instance rule); an operator of initech only."""
    return {
        "op": _person("path-op", [("acme", Role.OPERATOR)]),
        "mixed": _person("path-mixed", [("acme", Role.VIEWER), ("globex", Role.OPERATOR)]),
        "outsider": _person("path-out", [("initech", Role.OPERATOR)]),
    }


def console(user: Any, instance_id: str, action: str, data: dict[str, str]) -> tuple[int, str]:
    client = Client()
    client.force_login(user)
    r = client.post(f"/instances/{instance_id}/actions/{action}/run/", data)
    return r.status_code, html.unescape(r.content.decode())


def api(user: Any, instance_id: str, action: str, body: dict[str, Any]) -> tuple[int, str]:
    token = api_token_create(user=user, name=f"{user.username}-{action}")[1]
    r = Client().post(
        f"/api/instances/{instance_id}/{action}",
        body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    return r.status_code, r.json()["error"]["message"] if r.status_code >= 400 else ""


def cli(user: Any, instance_id: str, action: str, *argv: str) -> str:
    try:
        call_command("operate", "--as", user.username, "instance", action, instance_id, *argv)
    except CommandError as exc:
        return str(exc)
    return ""


def _unchanged(instance_id: str, status: str) -> None:
    assert Instance.objects.get(pk=instance_id).status == status
    assert Instance.objects.count() == 1
    assert not History.objects.filter(kind="operator").exists() and not AuditEntry.objects.exists()


def test_an_instance_of_another_tenant_is_refused_alike_on_every_path(people):
    make_instance("path-acme-1", workflow=DEMO, status="running")
    said = "no instance 'path-acme-1' in path-out's tenants; check the id (nothing was done)"
    status, page = console(people["outsider"], "path-acme-1", "pause", {"reason": "look"})
    assert status == 404 and said in page
    assert api(people["outsider"], "path-acme-1", "pause", {"reason": "look"}) == (404, said)
    assert cli(people["outsider"], "path-acme-1", "pause", "--reason", "look") == said
    _unchanged("path-acme-1", "running")


def test_a_viewer_of_the_instances_tenant_is_refused_alike_on_every_path(people):
    make_instance("path-acme-2", workflow=DEMO, status="running")
    said = "path-mixed is a viewer of tenant 'acme'; acting needs the operator role (nothing was done)"
    status, page = console(people["mixed"], "path-acme-2", "terminate", {"reason": "stop"})
    assert status == 403 and said in page
    assert api(people["mixed"], "path-acme-2", "terminate", {"reason": "stop"}) == (403, said)
    assert cli(people["mixed"], "path-acme-2", "terminate", "--reason", "stop") == said
    _unchanged("path-acme-2", "running")


def test_an_action_the_instances_state_does_not_allow_is_refused_alike_on_every_path(people):
    make_instance("path-acme-3", workflow=DEMO, status="running")
    said = "instance path-acme-3 is running; only errored instances can be retried"
    status, page = console(people["op"], "path-acme-3", "retry", {"reason": "again"})
    assert status == 409 and said in page
    assert api(people["op"], "path-acme-3", "retry", {"reason": "again"}) == (409, said)
    assert cli(people["op"], "path-acme-3", "retry", "--reason", "again") == said
    _unchanged("path-acme-3", "running")


def test_a_replay_that_sets_a_reserved_param_is_refused_alike_on_every_path(people):
    make_instance("path-acme-4", workflow=DEMO, status="errored", params={"a": 1})
    forged = {"a": 1, "_schedule": {"manual": True}}
    said = "the params key '_schedule' is reserved"
    status, page = console(people["op"], "path-acme-4", "replay", {"reason": "again", "params": json.dumps(forged)})
    assert status == 400 and said in page
    code, message = api(people["op"], "path-acme-4", "replay", {"reason": "again", "params": forged})
    assert code == 400 and said in message
    assert said in cli(people["op"], "path-acme-4", "replay", "--reason", "again", "--params", json.dumps(forged))
    _unchanged("path-acme-4", "errored")


def test_the_reason_rule_is_the_services_a_person_gives_one_an_api_client_may_not(people):
    make_instance("path-acme-5", workflow=DEMO, status="running")
    said = "give a reason: it is recorded in the instance's history and the audit log (nothing was done)"
    assert cli(people["op"], "path-acme-5", "pause", "--reason", "  ") == said
    with pytest.raises(actions.BadArguments, match="give a reason"):
        actions.instance_act(
            user=people["op"], origin=Origin(source="web"), instance_id="path-acme-5", action="pause", reason=""
        )
    long = "x" * (actions.REASON_MAX + 1)
    with pytest.raises(actions.BadArguments, match="at most 2000"):
        actions.instance_act(
            user=people["op"], origin=Origin(source="api"), instance_id="path-acme-5", action="pause", reason=long
        )
    _unchanged("path-acme-5", "running")
    assert api(people["op"], "path-acme-5", "pause", {}) == (200, "")
    assert AuditEntry.objects.get().action == "instance.pause"


def test_an_action_is_refused_an_argument_it_does_not_take(people):
    make_instance("path-acme-6", workflow=DEMO, status="running")
    with pytest.raises(actions.BadArguments, match="pause takes no argument rollback"):
        actions.instance_act(
            user=people["op"],
            origin=Origin.cli(),
            instance_id="path-acme-6",
            action="pause",
            reason="x",
            arguments={"rollback": True},
        )
    with pytest.raises(actions.UnknownAction, match="no action 'explode'"):
        actions.instance_act(
            user=people["op"], origin=Origin.cli(), instance_id="path-acme-6", action="explode", reason="x"
        )
    _unchanged("path-acme-6", "running")


def test_the_same_action_from_each_path_records_its_actor_and_source(people):
    for n in range(3):
        make_instance(f"path-src-{n}", workflow=DEMO, status="running")
    assert console(people["op"], "path-src-0", "pause", {"reason": "r"})[0] == 303
    assert api(people["op"], "path-src-1", "pause", {"reason": "r"})[0] == 200
    assert cli(people["op"], "path-src-2", "pause", "--reason", "r") == ""
    actors = dict(History.objects.filter(kind="operator").values_list("instance_id", "actor"))
    assert actors == {"path-src-0": "path-op", "path-src-1": "api:path-op", "path-src-2": "cli:path-op"}
    entries = sorted(AuditEntry.objects.values_list("source", "action", "selection"))
    assert entries == [
        (s, "instance.pause", {"instance_id": f"path-src-{n}"})
        for n, s in sorted(enumerate(("web", "api", "cli")), key=lambda p: p[1])
    ]
