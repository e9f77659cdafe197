"""`runledger connections` against a live test server over HTTP: a connection created with its
secret read from standard input (not the command line), shown with the secret masked, tested
against a fake (exit status 0, then 1 once the key is wrong), refused with every wrong field
printed and nothing written, disabled, and deleted after asking; `runledger credentials` disables,
enables and deletes an ingress credential."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from dashboard.access import user_ensure
from dashboard.cli import main
from dashboard.models import AuditEntry, Role
from ingest.pipelines.models import Connection
from ingest.triggers.models import IngressSecret
from ingest.triggers.services import api_token_create, ingress_secret_create
from tests.fakes import FakeZenRows

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def token(transactional_db: Any) -> str:
    user = user_ensure(username="cli-conn", password="pw-cli-conn", memberships=[("acme", Role.OPERATOR)])
    return api_token_create(user=user, name="cli")[1]


def run(live_server: Any, token: str, *argv: str) -> tuple[int, str]:
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=250, force_terminal=False, color_system=None, soft_wrap=True
    )  # a message is one line, however long: asserts read it whole
    code = main(["--url", live_server.url, "--token", token, *argv], console=console)
    return code, buffer.getvalue()


def test_a_connection_is_created_shown_tested_disabled_and_deleted(
    live_server: Any, token: str, monkeypatch: Any
) -> None:
    with FakeZenRows(api_key="zr-key-from-stdin-0001") as zr:
        monkeypatch.setattr("sys.stdin", io.StringIO("zr-key-from-stdin-0001\n"))
        code, out = run(
            live_server,
            token,
            "connections",
            "create",
            "acme",
            "zenrows",
            "--secret",
            "-",
            "--base-url",
            f"{zr.url}/v1/",
        )
        assert code == 0 and "created acme/zenrows" in out and "secret set, ends ••••0001" in out, out
        assert "zr-key-from-stdin" not in out and Connection.objects.get().secret == "zr-key-from-stdin-0001"
        code, out = run(live_server, token, "connections", "test", "acme", "zenrows")
        assert code == 0 and out.startswith("ok: ZenRows accepted the key"), out
        code, out = run(live_server, token, "connections", "edit", "acme", "zenrows", "--secret", "wrong-key-000000")
        assert code == 0 and "saved acme/zenrows" in out
        code, out = run(live_server, token, "connections", "test", "acme", "zenrows")
        assert code == 1 and out.startswith("failed: ZenRowsAuthError") and "wrong-key" not in out, out
    code, out = run(live_server, token, "connections", "list")
    assert code == 0 and "failed at" in out and "wrong-key" not in out
    code, out = run(live_server, token, "connections", "disable", "acme", "zenrows")
    assert code == 0 and Connection.objects.get().enabled is False
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code, out = run(live_server, token, "connections", "delete", "acme", "zenrows")
    assert code == 0 and "nothing was done" in out and Connection.objects.exists()
    code, out = run(live_server, token, "connections", "delete", "acme", "zenrows", "--yes")
    assert code == 0 and not Connection.objects.exists()
    assert [e.action for e in AuditEntry.objects.order_by("id")] == [
        "connection.create",
        "connection.test",
        "connection.update",
        "connection.test",
        "connection.disable",
        "connection.delete",
    ]


def test_a_bad_connection_prints_every_wrong_field_and_writes_nothing(live_server: Any, token: str) -> None:
    code, out = run(
        live_server, token, "connections", "create", "acme", "salesforce", "--base-url", "nope", "--provider", "openai"
    )
    assert code == 1, out
    for field in ("base_url", "key", "secret", "provider"):
        assert f"  {field}: " in out, out
    assert not Connection.objects.exists() and not AuditEntry.objects.exists()


def test_an_ingress_credential_is_disabled_enabled_and_deleted(live_server: Any, token: str) -> None:
    ingress_secret_create(tenant="acme", name="shop")
    assert run(live_server, token, "credentials", "disable", "acme", "shop")[0] == 0
    assert IngressSecret.objects.get().enabled is False
    assert run(live_server, token, "credentials", "enable", "acme", "shop")[0] == 0
    assert IngressSecret.objects.get().enabled is True
    code, out = run(live_server, token, "credentials", "delete", "acme", "shop", "--yes")
    assert code == 0 and "deleted acme/shop" in out and not IngressSecret.objects.exists()
