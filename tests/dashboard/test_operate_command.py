"""`manage.py operate`: operator actions from the command line keep the dashboard's tenant rules,
preview a redrive before acting on exactly its set, and write one audit entry each (source cli)."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from ledger_factories import make_instance
from test_ops_factories import failed_instance
from workflows_for_tests import DEMO

from dashboard.models import AuditEntry
from ingest.engine.models import DeadLetter, Instance

pytestmark = pytest.mark.db


def operate(*args: str) -> str:
    out = StringIO()
    call_command("operate", *args, stdout=out)
    return out.getvalue()


def test_an_instance_action_from_the_cli_is_audited_as_cli(users):
    make_instance("acme-cli", workflow=DEMO, status="running")
    operate("--as", "operator", "instance", "pause", "acme-cli", "--reason", "maintenance")
    assert Instance.objects.get(id="acme-cli").status in ("paused", "waitingForPause")
    e = AuditEntry.objects.get()
    assert (e.actor, e.action, e.source, e.user_agent, e.ip, e.affected, e.reason) == (
        "operator",
        "instance.pause",
        "cli",
        "cli",
        None,
        1,
        "maintenance",
    )


def test_a_stranger_cannot_act_on_another_tenants_instance_from_the_cli(users):
    make_instance("acme-cli2", workflow=DEMO, status="running")
    with pytest.raises(CommandError, match="no instance 'acme-cli2' in stranger's tenants"):
        operate("--as", "stranger", "instance", "pause", "acme-cli2", "--reason", "x")
    assert Instance.objects.get(id="acme-cli2").status == "running" and AuditEntry.objects.count() == 0


@pytest.mark.parametrize("ids", ["abc", "1,abc", ","])
def test_a_redrive_with_ids_that_do_not_parse_does_nothing(users, ids):
    failed_instance(tenant="acme")
    with pytest.raises(CommandError, match="nothing was done|selection is empty"):
        operate("--as", "operator", "redrive", "--ids", ids, "--reason", "x")
    assert DeadLetter.objects.filter(state="open").count() == 1 and AuditEntry.objects.count() == 0


def test_a_redrive_needs_a_named_selection(users):
    failed_instance(tenant="acme")
    with pytest.raises(CommandError, match="name the selection"):
        operate("--as", "operator", "redrive", "--reason", "x")
    assert DeadLetter.objects.filter(state="open").count() == 1


def test_a_redrive_previews_then_acts_only_on_the_previewed_set(users):
    first = [failed_instance(tenant="acme") for _ in range(2)]
    failed_instance(tenant="initech")  # not the operator's tenant
    shown = operate("--as", "operator", "redrive", "--all-matching", "--reason", "back")
    assert shown.startswith("2 open dead letter(s) selected")
    digest = re.search(r"--confirm (\w+)", shown).group(1)
    assert DeadLetter.objects.filter(state="open").count() == 3  # a preview acts on nothing
    failed_instance(tenant="acme")  # the set changes before the confirm
    with pytest.raises(CommandError, match="changed since the preview"):
        operate("--as", "operator", "redrive", "--all-matching", "--reason", "back", "--confirm", digest)
    assert AuditEntry.objects.count() == 0
    shown = operate("--as", "operator", "redrive", "--all-matching", "--reason", "back")
    digest = re.search(r"--confirm (\w+)", shown).group(1)
    assert "redriven: 3" in operate(
        "--as", "operator", "redrive", "--all-matching", "--reason", "back", "--confirm", digest
    )
    assert DeadLetter.objects.filter(state="open").values_list("tenant", flat=True).get() == "initech"
    e = AuditEntry.objects.get()
    assert (e.action, e.affected, e.source, e.tenants) == ("dead_letters.redrive", 3, "cli", ["acme"])
    assert {d.id for d in first} < set(DeadLetter.objects.filter(state="redriven").values_list("id", flat=True))


def test_a_stranger_naming_another_tenants_dead_letter_is_refused(users):
    dl = failed_instance(tenant="acme")
    with pytest.raises(CommandError, match="in stranger's tenants"):
        operate("--as", "stranger", "redrive", "--ids", str(dl.id), "--reason", "x")
    with pytest.raises(CommandError, match="in stranger's tenants"):
        operate("--as", "stranger", "discard", str(dl.id), "--reason", "x")
    assert DeadLetter.objects.get(id=dl.id).state == "open" and AuditEntry.objects.count() == 0
