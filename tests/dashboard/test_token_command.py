"""`manage.py token`: the first API token of a user made on the server, without a shell: create
prints a token that authenticates (and only that on stdout), list shows prefixes only, revoke
makes it a 401; each create and revoke writes one audit entry; bad input changes nothing."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from dashboard.models import AuditEntry
from ingest.triggers.models import ApiToken

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def token_cmd(*argv: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("token", *argv, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def api(token: str) -> int:
    return Client().get("/api/instances", headers={"Authorization": f"Bearer {token}"}).status_code


def test_create_prints_a_token_that_authenticates_and_revoke_ends_it(users: None) -> None:
    out, err = token_cmd("create", "--user", "viewer", "--name", "first cli", "--expires-days", "30")
    token = out.strip()
    assert token.startswith("rla_") and "\n" not in token  # stdout is the token alone: $(manage.py token …)
    assert "shown this once" in err and token not in err
    assert api(token) == 200
    row = ApiToken.objects.get(user__username="viewer")
    assert row.name == "first cli" and row.expires_at is not None
    assert timedelta(days=29, hours=23) < row.expires_at - timezone.now() <= timedelta(days=30)
    listed, _ = token_cmd("list", "--user", "viewer")
    assert "first cli" in listed and f"{row.token_prefix}…" in listed and token not in listed
    assert "active" in listed
    out, _ = token_cmd("revoke", "--user", "viewer", "--id", str(row.pk))
    assert "revoked" in out and api(token) == 401
    assert "revoked" in token_cmd("list", "--user", "viewer")[0]
    entries = list(AuditEntry.objects.order_by("pk"))
    assert [(e.action, e.actor, e.source) for e in entries] == [
        ("api_token.create", "viewer", "cli"),
        ("api_token.revoke", "viewer", "cli"),
    ]
    assert not any(token in str(e.selection) for e in entries)


def test_revoke_is_scoped_to_the_named_user(users: None) -> None:
    token = token_cmd("create", "--user", "operator", "--name", "ops")[0].strip()
    row = ApiToken.objects.get(user__username="operator")
    with pytest.raises(CommandError, match="stranger has no API token with id"):
        token_cmd("revoke", "--user", "stranger", "--id", str(row.pk))
    assert api(token) == 200 and not AuditEntry.objects.filter(action="api_token.revoke").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["create", "--user", "nobody", "--name", "x"], "no user 'nobody'"),
        (["create", "--user", "viewer", "--name", "  "], "name is 1 to 100 characters"),
        (["create", "--user", "viewer", "--name", "x", "--expires-days", "0"], "from 1 to 3650"),
        (["create", "--user", "viewer", "--name", "x", "--expires-days", "99999"], "from 1 to 3650"),
    ],
)
def test_bad_input_is_refused_with_a_message_and_creates_nothing(users: None, argv: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        token_cmd(*argv)
    assert not ApiToken.objects.exists() and not AuditEntry.objects.exists()


def test_help_describes_the_three_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        call_command("token", "--help")
    text = capsys.readouterr().out
    assert "create" in text and "list" in text and "revoke" in text and "shown" in text
