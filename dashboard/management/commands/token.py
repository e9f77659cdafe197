"""`manage.py token ...`: API tokens on the server, for the first token of a user before anyone
can sign in to the console (or for a service account, a user without a password).

    token create --user NAME --name NAME [--expires-days N]   prints the token once
    token list --user NAME                                      prefixes only, never a token
    token revoke --user NAME --id N                             refused from now on

Each create and revoke writes one audit entry (source "cli") for the token's user, as the API
tokens page does; the token itself is printed on stdout once and kept nowhere but as its hash.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from dashboard import access
from dashboard.audit import Audit, Origin, audited
from ingest.triggers.errors import TriggerError
from ingest.triggers.selectors import api_token_list
from ingest.triggers.services import api_token_create, api_token_expiry, api_token_revoke
from ingest.triggers.services.tokens import EXPIRES_DAYS_MAX


def when(t: Any) -> str:
    return f"{t:%Y-%m-%d %H:%M}" if t else "never"


class Command(BaseCommand):
    help = (
        "Create, list and revoke a user's API tokens for the REST API and the runledger CLI "
        "(the console's API tokens page does the same once the user can sign in). "
        "`token create` prints the new token once: store it, it cannot be shown again."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="what", required=True, metavar="{create,list,revoke}")
        create = sub.add_parser("create", help="make a token and print it once")
        create.add_argument("--user", required=True, help="the username the token acts as")
        create.add_argument("--name", required=True, help='what uses it, e.g. "laptop cli"')
        create.add_argument(
            "--expires-days",
            type=int,
            default=None,
            help=f"days until it stops working (1 to {EXPIRES_DAYS_MAX}; default: never)",
        )
        listing = sub.add_parser("list", help="a user's tokens: id, name, prefix, dates, state")
        listing.add_argument("--user", required=True)
        revoke = sub.add_parser("revoke", help="revoke one token of a user by its id (see `token list`)")
        revoke.add_argument("--user", required=True)
        revoke.add_argument("--id", dest="token_id", type=int, required=True, help="the id `token list` prints")

    def handle(self, *args: Any, **o: Any) -> None:
        user = get_user_model().objects.filter(username=o["user"]).first()
        if user is None:
            raise CommandError(
                f"no user {o['user']!r}; create it first (manage.py createsuperuser, or the admin's Users page)"
            )
        try:
            match o["what"]:
                case "create":
                    self._create(user, o)
                case "list":
                    self._list(user)
                case "revoke":
                    self._revoke(user, o["token_id"])
        except TriggerError as exc:
            raise CommandError(str(exc)) from None

    def _create(self, user: Any, o: dict[str, Any]) -> None:
        if not user.is_active:
            raise CommandError(f"user {user.get_username()!r} is inactive: a token of theirs would not work")
        now = timezone.now()
        expires_at = api_token_expiry(days=o["expires_days"], now=now)
        name = o["name"]
        row, token = audited(
            user=user,
            origin=Origin.cli(),
            audit=Audit(
                "api_token.create",
                access.tenants_for(user),
                {"name": name, "expires_at": expires_at.isoformat() if expires_at else None},
            ),
            run=lambda: api_token_create(user=user, name=name, expires_at=expires_at, now=now),
        )
        if not access.tenants_for(user):
            self.stderr.write(
                f"note: {user.get_username()} is a member of no tenant yet, so the token "
                "sees nothing; add one in the admin (Memberships)"
            )
        until = f"until {row.expires_at:%Y-%m-%d %H:%M} UTC" if row.expires_at else "until revoked"
        self.stderr.write(
            f"API token {row.name!r} (id {row.pk}) for {user.get_username()}, valid {until}. "
            "Store it now: it is shown this once."
        )
        self.stdout.write(token)

    def _list(self, user: Any) -> None:
        rows = api_token_list(user=user, now=timezone.now())
        if not rows:
            self.stdout.write(f"{user.get_username()} has no API token")
            return
        self.stdout.write(
            f"{'id':>6}  {'name':<24} {'prefix':<12} {'created':<17} {'last used':<17} {'expires':<17} state"
        )
        for r in rows:
            self.stdout.write(
                f"{r.id:>6}  {r.name[:24]:<24} {r.prefix + '…':<12} {when(r.created_at):<17} "
                f"{when(r.last_used_at):<17} {when(r.expires_at):<17} {r.state}"
            )

    def _revoke(self, user: Any, token_id: int) -> None:
        mine = {r.id: r for r in api_token_list(user=user, now=timezone.now())}
        row = mine.get(token_id)
        if row is None:
            raise CommandError(
                f"{user.get_username()} has no API token with id {token_id}; "
                f"`manage.py token list --user {user.get_username()}` shows their ids"
            )
        if row.state == "revoked":
            self.stdout.write(f"token {row.name!r} ({row.prefix}…) was already revoked; nothing changed")
            return
        audited(
            user=user,
            origin=Origin.cli(),
            audit=Audit("api_token.revoke", access.tenants_for(user), {"name": row.name, "prefix": row.prefix}),
            run=lambda: api_token_revoke(token_id=token_id, now=timezone.now(), user=user),
        )
        self.stdout.write(f"revoked token {row.name!r} ({row.prefix}…) of {user.get_username()}")
