"""Where the CLI sends a user without a working token: the console's API tokens page and the
management command, never the admin; with no token and with one the server refuses (401)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.utils import timezone
from rich.console import Console

from dashboard.access import user_ensure
from dashboard.cli import main
from dashboard.models import Role
from ingest.triggers.services import api_token_create, api_token_revoke

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def run(*argv: str) -> tuple[int, str]:
    buffer = io.StringIO()
    code = main(
        list(argv), console=Console(file=buffer, width=300, force_terminal=False, color_system=None, soft_wrap=True)
    )
    return code, buffer.getvalue()


def test_without_a_token_the_cli_points_to_the_tokens_page_and_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNLEDGER_TOKEN", raising=False)
    code, out = run("--url", "http://runledger.example:8000/", "list")
    assert code == 2
    assert "http://runledger.example:8000/tokens/" in out and "manage.py token create" in out
    assert "admin" not in out


def test_a_refused_token_gets_the_same_pointers(live_server: Any) -> None:
    user = user_ensure(username="cli-hint", password="pw", memberships=[("acme", Role.VIEWER)])
    row, token = api_token_create(user=user, name="soon revoked")
    assert run("--url", live_server.url, "--token", token, "list")[0] == 0
    api_token_revoke(token_id=row.pk, now=timezone.now())
    code, out = run("--url", live_server.url, "--token", token, "list")
    assert code == 1 and "HTTP 401" in out
    assert f"{live_server.url}/tokens/" in out and "manage.py token create" in out and "admin" not in out
