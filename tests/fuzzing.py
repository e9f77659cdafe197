"""Shared support for the fuzz suites: hostile values, a one-query snapshot of every ledger
table's row count, the refusal contract, and the tally the run prints at its end.

The contract every suite asserts for every generated request: never a 5xx; under /api/ and
/hooks/ an error is the JSON envelope `{"error": {"code", "message"}}`; a refused request (4xx)
changed no row in any table of the engine, triggers, ingest or dashboard apps.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.db import connection
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

LEDGER_APPS = ("engine", "triggers", "ingest", "dashboard")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

tally: Counter[str] = Counter()  # "<suite>:cases", "<suite>:5xx", "<suite>:rows_changed"


def ledger_tables() -> list[str]:
    return sorted(
        {m._meta.db_table for label in LEDGER_APPS for m in apps.get_app_config(label).get_models() if m._meta.managed}
    )


def ledger_counts() -> tuple[int, ...]:
    """Row counts of every ledger table, in one query."""
    tables = ledger_tables()
    quoted = connection.ops.quote_name
    sql = "SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {quoted(t)})" for t in tables)
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return tuple(cursor.fetchone())


def check_answer(suite: str, path: str, response: Any, before: tuple[int, ...], *, head: bool = False) -> None:
    """Assert the refusal contract for one request and count it in the tally."""
    tally[f"{suite}:cases"] += 1
    status = response.status_code
    if status >= 500:
        tally[f"{suite}:5xx"] += 1
    changed = status >= 400 and ledger_counts() != before
    if changed:
        tally[f"{suite}:rows_changed"] += 1
    assert status < 500, (path, status, response.content[:300])
    if status >= 400 and path.startswith(("/api/", "/hooks/")):
        assert response["Content-Type"].startswith("application/json"), (path, status, response.content[:200])
        if head:  # HEAD answers carry headers only
            return
        error = json.loads(response.content)["error"]
        assert isinstance(error["code"], str) and error["code"]
        assert isinstance(error["message"], str) and error["message"], error
    assert not changed, (path, status, response.content[:300])


def answered(suite: str, path: str, send: Callable[[], Any], *, head: bool = False) -> Any:
    """Send one request and assert the contract; an exception the view let out (the test
    client re-raises it) counts as a 5xx before it fails the test."""
    before = ledger_counts()
    try:
        response = send()
    except Exception:
        tally[f"{suite}:cases"] += 1
        tally[f"{suite}:5xx"] += 1
        raise
    check_answer(suite, path, response, before, head=head)
    return response


def api_fuzz_token(username: str) -> str:
    """An API token of an operator of acme and default, with an instance and a schedule of acme
    for the generated requests to find (the REST API fuzz suites start from them)."""
    from django.utils import timezone

    from dashboard.access import user_ensure
    from dashboard.models import Role
    from ingest.engine.services import instances as engine_services
    from ingest.triggers.services import api_token_create, schedule_create

    user = user_ensure(
        username=username, password="pw", memberships=[("acme", Role.OPERATOR), ("default", Role.OPERATOR)]
    )
    _, token = api_token_create(user=user, name=f"{username}-schemathesis")
    engine_services.instance_create(workflow="test-echo", id=f"{username}-1", tenant="acme")
    schedule_create(name=username, workflow="test-echo", cron_expression="* * * * *", tenant="acme", now=timezone.now())
    return token


def summary_lines() -> list[str]:
    suites = sorted({key.split(":")[0] for key in tally})
    lines = []
    for suite in suites:
        lines.append(
            f"fuzz {suite}: {tally[suite + ':cases']} cases, {tally[suite + ':5xx']} answered 5xx, "
            f"{tally[suite + ':rows_changed']} refused requests changed rows"
        )
    if suites:
        total = sum(tally[s + ":cases"] for s in suites)
        errors = sum(tally[s + ":5xx"] for s in suites)
        changed = sum(tally[s + ":rows_changed"] for s in suites)
        lines.append(f"fuzz total: {total} cases, {errors} answered 5xx, {changed} refused requests changed rows")
    return lines


# ---- hostile values ----------------------------------------------------------------------------

NASTY_TEXT = [
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "\U0001f600",
    "",
    " ",
    "%00",
    "\\u0000",
    "'; DROP TABLE x; --",
    "<script>",
    "9" * 5000,
    "\u202e",
    "a" * 300,
]
nasty_text = st.sampled_from(NASTY_TEXT) | st.text(max_size=30)
huge_int = st.integers(min_value=4301, max_value=6000).map(lambda n: int("9" * n))
edge_numbers = (
    st.sampled_from([0, -1, 2**63, -(2**63) - 1, 10**40, 10**41, 1e308, 5e-324, 0.1])
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
)
scalars = st.none() | st.booleans() | edge_numbers | nasty_text


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(nasty_text, children, max_size=4),
    max_leaves=12,
)


def raw_json(value: Any) -> bytes:
    """JSON text as a hostile client writes it: lone surrogates and NaN included."""
    return json.dumps(value, ensure_ascii=True, allow_nan=True).encode()


HOSTILE_BODIES = [
    b'{"a": "\\u0000"}',
    b'{"a\\u0000": 1}',
    b'{"a": "\\ud800"}',
    b'{"a": NaN}',
    b'{"a": Infinity}',
    b'{"a": 1e999}',
    b'{"a": ' + b"9" * 5000 + b"}",
    b"[" * 5000 + b"]" * 5000,
    b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"a": "' + b"[" * 50 + b'"}',
    b'{"_schedule": {"cron": "* * * * *"}}',
    b'{"_event": {"id": "x"}}',
    b"\xff\xfe",
    b"\x00",
    b"null",
    b"[]",
    b'"x"',
    b"",
    b"{",
    b'{"a": 1',
    b'{"a": 1}{',
    b"\xef\xbb\xbf{}",
    b'{"a": "' + b"x" * 300_000 + b'"}',
    b"[" + b"1," * 20_000 + b"1]",
]
hostile_body = (
    st.sampled_from(HOSTILE_BODIES)
    | st.binary(max_size=200)
    | json_values.map(raw_json)
    | st.integers(min_value=30, max_value=3000).map(lambda d: b'{"x": ' + b"[" * d + b"]" * d + b"}")
)
content_types = st.sampled_from(
    [
        "application/json",
        "text/plain",
        "application/x-www-form-urlencoded",
        "text/xml",
        "application/json; charset=utf-8",
        "multipart/form-data; boundary=x",
        "application/vnd.api+json",
        "",
    ]
)


def fuzz(examples: int) -> settings:
    """Hypothesis settings for a fuzz test: no deadline (the database sets the pace). Under CI
    the examples are derandomized, so a submission's run is repeatable; a developer's runs
    explore new ones (and keep failures in .hypothesis/ to replay)."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=IN_CI,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )
