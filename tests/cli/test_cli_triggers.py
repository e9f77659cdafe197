"""`runledger schedules|routes|subscriptions|credentials` against a live test server over HTTP:
each set up and changed without a shell on the server, every refused field printed at once with
a non-zero status and no row changed, deletions and rotations asking first, the new pair printed
once, audited as "api", and bounded by the token's tenants."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rich.console import Console

from dashboard.access import user_ensure
from dashboard.cli import main
from dashboard.models import AuditEntry, Role
from ingest.triggers.models import IngressSecret, Route, Schedule, Subscription
from ingest.triggers.services import (
    api_token_create,
    event_publish,
    ingress_secret_create,
    route_upsert,
)
from tests.triggers import support  # noqa: F401  (registers test-echo)
from tests.triggers.support import signed_post

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
        file=buffer, width=250, force_terminal=False, color_system=None, soft_wrap=True
    )  # a message is one line, however long: asserts read it whole
    code = main(["--url", live_server.url, "--token", token, *argv], console=console)
    return code, buffer.getvalue()


def rows() -> tuple[list[Any], ...]:
    return (
        list(Schedule.objects.values()),
        list(Route.objects.values()),
        list(Subscription.objects.values()),
        list(IngressSecret.objects.values()),
        list(AuditEntry.objects.values()),
    )


def test_a_schedule_is_created_listed_switched_run_and_deleted(live_server: Any, tokens: dict[str, str]) -> None:
    op = tokens["operator"]
    code, out = run(
        live_server,
        op,
        "schedules",
        "create",
        "nightly",
        "--tenant",
        "acme",
        "--workflow",
        "test-echo",
        "--cron",
        "59 23 LW * *",
        "--timezone",
        "Europe/Paris",
        "--params",
        '{"n": 1}',
    )
    assert code == 0 and "created nightly" in out, out
    assert Schedule.objects.get().params == {"n": 1}
    code, out = run(live_server, tokens["viewer"], "schedules", "list")
    assert code == 0 and "nightly" in out and "59 23 LW * *" in out
    assert run(live_server, op, "schedules", "disable", "nightly")[0] == 0 and not Schedule.objects.get().enabled
    assert run(live_server, op, "schedules", "enable", "nightly")[0] == 0 and Schedule.objects.get().enabled
    code, out = run(live_server, op, "schedules", "run", "nightly")
    assert code == 0 and "nightly-manual-" in out
    code, out = run(live_server, op, "schedules", "delete", "nightly")
    assert code == 0 and "nothing was done" in out and Schedule.objects.exists()  # asks first
    assert run(live_server, op, "schedules", "delete", "nightly", "--yes")[0] == 0 and not Schedule.objects.exists()
    assert list(AuditEntry.objects.order_by("id").values_list("action", "source")) == [
        (f"schedule.{a}", "api") for a in ("create", "disable", "enable", "run", "delete")
    ]


def test_a_bad_route_prints_every_wrong_field_and_changes_nothing(live_server: Any, tokens: dict[str, str]) -> None:
    before = rows()
    code, out = run(
        live_server,
        tokens["operator"],
        "routes",
        "create",
        "has space",
        "--tenant",
        "acme",
        "--workflow",
        "nope",
        "--wait-seconds",
        "0",
        "--priority",
        "5000",
    )
    assert code == 1 and "invalid_route" in out and "HTTP 400" in out
    for field in ("name", "workflow", "wait_seconds", "priority"):
        assert f"  {field}: " in out, (field, out)
    code, out = run(
        live_server,
        tokens["operator"],
        "schedules",
        "create",
        "s",
        "--tenant",
        "acme",
        "--workflow",
        "test-echo",
        "--cron",
        "0 3 * * *",
        "--params",
        "{bad",
    )
    assert code == 2 and "--params is not valid JSON" in out
    assert rows() == before


def test_a_route_is_created_edited_disabled_and_deleted(live_server: Any, tokens: dict[str, str]) -> None:
    op = tokens["operator"]
    code, out = run(
        live_server,
        op,
        "routes",
        "create",
        "orders",
        "--tenant",
        "acme",
        "--workflow",
        "test-echo",
        "--rate-limit-per-minute",
        "60",
        "--description",
        "the shop",
    )
    assert code == 0 and "created orders" in out and "at most 60/min" in out, out
    _, token, secret = ingress_secret_create(tenant="acme")
    assert signed_post(Client(), "orders", {"n": 1}, token=token, secret=secret).status_code == 202
    code, out = run(live_server, op, "routes", "edit", "orders", "--priority", "7", "--sync-default")
    assert code == 0 and (Route.objects.get().priority, Route.objects.get().sync_default) == (7, True)
    assert run(live_server, op, "routes", "disable", "orders")[0] == 0
    refused = signed_post(Client(), "orders", {"n": 2}, token=token, secret=secret)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "route_disabled"
    code, out = run(live_server, op, "routes", "show", "orders")
    assert code == 0 and "disabled" in out and "priority 7" in out
    assert run(live_server, op, "routes", "delete", "orders", "--yes")[0] == 0 and not Route.objects.exists()


def test_a_subscription_is_created_and_starts_its_workflow(live_server: Any, tokens: dict[str, str]) -> None:
    op = tokens["operator"]
    code, out = run(
        live_server,
        op,
        "subscriptions",
        "create",
        "--tenant",
        "acme",
        "--pattern",
        "user.*",
        "--workflow",
        "test-echo",
        "--filters",
        '{"plan": "pro"}',
    )
    assert code == 0 and "events 'user.*'" in out, out
    sub = Subscription.objects.get()
    assert len(event_publish(type="user.created", data={"plan": "pro"}, tenant="acme", now=timezone.now()).started) == 1
    code, out = run(live_server, op, "subscriptions", "edit", str(sub.pk), "--filters", "[1]")
    assert code == 2 and "must be a JSON object" in out
    code, out = run(live_server, op, "subscriptions", "edit", str(sub.pk), "--pattern", "bad pattern")
    assert code == 1 and "  pattern: " in out and Subscription.objects.get().pattern == "user.*"
    assert run(live_server, op, "subscriptions", "disable", str(sub.pk))[0] == 0
    code, out = run(live_server, tokens["viewer"], "subscriptions", "list")
    assert code == 0 and "user.*" in out and "disabled" in out
    assert run(live_server, op, "subscriptions", "delete", str(sub.pk), "--yes")[0] == 0
    assert not Subscription.objects.exists()


def test_credentials_are_made_and_rotated_with_an_overlap_the_pair_printed_once(
    live_server: Any, tokens: dict[str, str]
) -> None:
    route_upsert(name="orders", workflow="test-echo", tenant="acme")
    op = tokens["operator"]
    code, out = run(live_server, op, "credentials", "create", "--tenant", "acme", "--name", "shop")
    assert code == 0, out
    token = out.split("token:  ")[1].split()[0]
    secret = out.split("secret: ")[1].split()[0]
    assert signed_post(Client(), "orders", {"n": 1}, token=token, secret=secret).status_code == 202
    code, out = run(live_server, op, "credentials", "list")
    assert code == 0 and token[:10] in out and token not in out and secret not in out
    code, out = run(live_server, op, "credentials", "rotate", "acme", "shop", "--reason", "yearly")
    assert "nothing was done" in out and IngressSecret.objects.get().rotated_at is None  # asks first
    code, out = run(
        live_server, op, "credentials", "rotate", "acme", "shop", "--reason", "yearly", "--overlap", "600", "--yes"
    )
    assert code == 0 and "the old pair works until" in out
    new_token, new_secret = out.split("token:  ")[1].split()[0], out.split("secret: ")[1].split()[0]
    assert signed_post(Client(), "orders", {"n": 2}, token=token, secret=secret).status_code == 202
    assert signed_post(Client(), "orders", {"n": 3}, token=new_token, secret=new_secret).status_code == 202
    code, out = run(
        live_server, op, "credentials", "rotate", "acme", "shop", "--reason", " ", "--overlap", "-1", "--yes"
    )
    assert code == 1 and "  reason: " in out and "  overlap_seconds: " in out
    entry = AuditEntry.objects.get(action="ingress_secret.rotate")
    assert (entry.reason, entry.source, entry.selection["overlap_seconds"]) == ("yearly", "api", 600)


def test_a_viewer_and_a_stranger_are_refused_and_nothing_changes(live_server: Any, tokens: dict[str, str]) -> None:
    route_upsert(name="orders", workflow="test-echo", tenant="acme")
    ingress_secret_create(tenant="acme")
    before = rows()
    code, out = run(live_server, tokens["viewer"], "routes", "disable", "orders")
    assert code == 1 and "forbidden" in out and "HTTP 403" in out
    code, out = run(live_server, tokens["viewer"], "credentials", "rotate", "acme", "default", "--reason", "x", "--yes")
    assert code == 1 and "HTTP 403" in out
    code, out = run(live_server, tokens["stranger"], "routes", "delete", "orders", "--yes")
    assert code == 1 and "route_not_found" in out
    code, out = run(
        live_server,
        tokens["stranger"],
        "schedules",
        "create",
        "x",
        "--tenant",
        "acme",
        "--workflow",
        "test-echo",
        "--cron",
        "0 3 * * *",
    )
    assert code == 1 and "tenant_not_found" in out
    code, out = run(live_server, tokens["stranger"], "routes", "list")
    assert code == 0 and "orders" not in out and "0 route(s)" in out
    assert rows() == before
