"""`runledger list --attr` speaks the console's attribute grammar: a bad term is refused before
anything is sent (the same parser as the server's), a good one lists what the server matches;
`--top-level` and `--parent` split fan-out items from their runs."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from rich.console import Console

from dashboard.access import user_ensure
from dashboard.cli import main
from dashboard.models import Role
from ingest.engine.models import FanOut, FanOutItem, Step
from ingest.engine.services.attributes import attributes_set
from ingest.triggers.services import api_token_create
from tests.dashboard.ledger_factories import T0, make_instance

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def run(*argv: str) -> tuple[int, str]:
    buffer = io.StringIO()
    code = main(
        list(argv), console=Console(file=buffer, width=300, force_terminal=False, color_system=None, soft_wrap=True)
    )
    return code, buffer.getvalue()


def test_a_bad_attribute_term_is_refused_before_anything_is_sent() -> None:
    # Nothing listens on this port: the refusal comes from the CLI's own parse.
    code, out = run("--url", "http://127.0.0.1:9/", "--token", "rl_x", "list", "--attr", "amount>=lots")
    assert code == 2 and "--attr" in out and "'lots' is not a number" in out


def test_the_cli_lists_what_the_grammar_matches(live_server: Any) -> None:
    user = user_ensure(username="cli-attr", password="pw", memberships=[("acme", Role.VIEWER)])
    _, token = api_token_create(user=user, name="attr")
    parent = make_instance("run-a", created_at=T0)
    make_instance("run-b", created_at=T0 + timedelta(minutes=1))
    step = Step.objects.create(
        instance=parent, name="fan", seq=1, position=1, kind="fan_out", status="waiting", started_at=T0
    )
    fan = FanOut.objects.create(
        instance=parent,
        step=step,
        step_name="fan",
        handler="h",
        handler_kind="workflow",
        item_workflow="url-classify",
        expected=1,
        created=1,
        started_at=T0,
        updated_at=T0,
        deadline=T0,
    )
    item = make_instance(f"_fo{fan.id}-0", created_at=T0 + timedelta(minutes=2), parent=parent)
    FanOutItem.objects.create(instance=item, fan_out=fan, index=0)
    attributes_set(instance_id="run-a", values={"customer": "acme", "amount": "120"})
    attributes_set(instance_id="run-b", values={"customer": "globex", "region": "eu"})
    attributes_set(instance_id=item.id, values={"customer": "acme", "amount": "5"})
    base = ("--url", live_server.url, "--token", token, "list")

    def listed(*flags: str) -> set[str]:
        code, out = run(*base, *flags)
        assert code == 0, out
        return {name for name in ("run-a", "run-b", item.id) if name in out}

    assert listed("--attr", "customer:acme|globex") == {"run-a", "run-b", item.id}
    assert listed("--attr", "customer:acme|globex", "--top-level") == {"run-a", "run-b"}
    assert listed("--attr", "amount>=100") == {"run-a"}
    assert listed("--attr", "!region:eu", "--attr", "amount:1..10") == {item.id}
    assert listed("--parent", "run-a") == {item.id}
