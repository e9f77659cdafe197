"""Hypothesis over the dashboard: every page with hostile filters, every form with hostile
fields, as an operator. Never a 5xx, and a refused request (4xx) changes no row
(tests/fuzzing.py)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ledger_factories import make_instance
from test_ops_factories import approval, budget, failed_instance
from workflows_for_tests import DEMO

from tests.fuzzing import NASTY_TEXT, answered, fuzz

pytestmark = pytest.mark.db

PAGES = [
    "/",
    "/workflows/",
    "/workflows/{wf}/",
    "/dead-letters/",
    "/dead-letters/redrive/",
    "/costs/",
    "/costs/export.csv",
    "/budgets/",
    "/budgets/new/",
    "/budgets/{budget}/edit/",
    "/approvals/",
    "/approvals/{approval}/",
    "/instances/",
    "/instances/{inst}/",
    "/instances/{inst}/actions/replay/",
    "/dead-letters/{dl}/",
    "/dead-letters/{dl}/replay/",
    "/login/",
    "/connections/",
    "/connections/new/",
    "/connections/acme/{conn}/",
    "/connections/acme/{conn}/delete/",
]
FILTER_KEYS = [
    "window",
    "from",
    "to",
    "service",
    "workflow",
    "step",
    "tenant",
    "model",
    "by",
    "sort",
    "q",
    "status",
    "range",
    "id",
    "since",
    "until",
    "cursor",
    "signature",
    "page",
    "error",
]
dates = st.sampled_from(
    [
        "9999-12-31T23:59:59",
        "9999-12-31",
        "0001-01-01",
        "1970-01-01",
        "2026-02-30",
        "2026-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59-01:00",
        "-1",
        "1e999",
    ]
)
values = dates | st.sampled_from(NASTY_TEXT) | st.text(max_size=20)
json_texts = st.sampled_from(
    [
        '{"a": "\\u0000"}',
        '{"a": "\\ud800"}',
        '{"a": ' + "9" * 5000 + "}",
        '{"a": ' + "[" * 20_000 + "]" * 20_000 + "}",
        '{"_schedule": {}}',
        '{"_event": 1}',
        "[1]",
        "{",
        '{"a": NaN}',
        '{"a": 1e999}',
        '{"ok": 1}',
        "",
    ]
) | st.text(max_size=30)
FORM_FIELDS = {
    "reason": values,
    "rate_per_second": st.sampled_from(["1e999", "NaN", "-1", "0.5", "9" * 5000, "inf"]) | values,
    "params": json_texts,
    "payload": json_texts,
    "type": values,
    "from_step": values,
    "rollback": values,
    "confirm": st.sampled_from(["True", "1", "", "\x00"]),
    "decision": st.sampled_from(["approve", "reject", "x"]),
    "comment": values,
    "f_facts": st.sampled_from(["9" * 5000, "1e999", "NaN", "-0", "4"]) | values,
    "scope": values,
    "key": values,
    "period": values,
    "limit": st.sampled_from(["9" * 5000, "1e20", "-1"]) | values,
    "policy": values,
    "ids": st.sampled_from(["abc", "", "1,2", "9" * 30, "9" * 5000, "\x00"]) | values,
    "username": values,
    "password": values,
    "kind": st.sampled_from(["gong", "salesforce", "llm", "dataforseo", "zenrows", "hubspot", ""]) | values,
    "tenant": st.sampled_from(["acme", "initech", " acme", ""]) | values,
    "base_url": values,
    "secret": values,
    "refresh_token": values,
    "webhook_key": values,
    "provider": values,
    "model": values,
    "options": json_texts,
    "enabled": st.sampled_from(["on", "", "x"]),
    "version": st.sampled_from(["", "0", "9" * 30, "abc"]) | values,
}


@pytest.fixture
def ledger(operator: Any) -> dict[str, Any]:
    inst = make_instance("acme-fuzz", workflow=DEMO, status="errored", params={"a": 1})
    return {
        "client": operator,
        "inst": inst.id,
        "dl": failed_instance(tenant="acme").id,
        "approval": approval(fields=[{"name": "facts", "type": "number", "required": True}]).id,
        "budget": budget().id,
        "wf": DEMO,
        "conn": _connection(),
    }


def _connection() -> str:
    from ingest.pipelines.connections import connection_create

    return connection_create(tenant="acme", kind="zenrows", secret="zr-fuzz-key-0001").kind


def filled(template: str, ids: dict[str, Any], target: str | None) -> str:
    path = template
    for name in ("inst", "dl", "approval", "budget", "wf", "conn"):
        path = path.replace("{" + name + "}", quote(target, safe="%") if target is not None else str(ids[name]))
    return path


def check(client: Any, method: str, path: str, data: Any = None) -> Any:
    return answered("forms", path, lambda: client.get(path) if method == "GET" else client.post(path, data or {}))


@fuzz(400)
@given(
    template=st.sampled_from(PAGES),
    query=st.lists(st.tuples(st.sampled_from(FILTER_KEYS), values), max_size=4),
    target=st.none() | st.sampled_from(["%00", "nope", "9" * 30, "a%00b", "x" * 300]),
)
def test_every_page_with_hostile_filters_answers_cleanly(
    ledger: dict[str, Any], template: str, query: list[tuple[str, str]], target: str | None
) -> None:
    qs = "&".join(f"{quote(k)}={quote(v, safe='', errors='surrogatepass')}" for k, v in query)
    check(ledger["client"], "GET", filled(template, ledger, target) + (f"?{qs}" if qs else ""))


FORMS = [
    "/instances/{inst}/actions/{action}/run/",
    "/dead-letters/{dl}/retry/",
    "/dead-letters/{dl}/discard/",
    "/dead-letters/{dl}/replay/run/",
    "/dead-letters/redrive/run/",
    "/budgets/save/",
    "/approvals/{approval}/answer/",
    "/login/",
    "/connections/new/create/",
    "/connections/acme/{conn}/save/",
    "/connections/acme/{conn}/disable/",
    "/connections/acme/{conn}/delete/run/",
]
ACTIONS = ["pause", "resume", "terminate", "restart", "retry", "replay", "event", "nope"]


@fuzz(500)
@given(
    template=st.sampled_from(FORMS),
    action=st.sampled_from(ACTIONS),
    fields=st.fixed_dictionaries({}, optional=FORM_FIELDS),
)
def test_every_form_with_hostile_fields_answers_cleanly(
    ledger: dict[str, Any], template: str, action: str, fields: dict[str, str]
) -> None:
    path = filled(template.replace("{action}", action), ledger, None)
    if "/redrive/run/" in path and fields.get("ids", "").strip(",").isdigit() is False:
        # An unparseable selection acting on every dead letter is issue 15 §2 (another change);
        # here the redrive form gets a valid selection so its other fields are what is fuzzed.
        fields["ids"] = str(ledger["dl"])
    check(
        ledger["client"],
        "POST",
        path,
        {k: v.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for k, v in fields.items()},
    )
