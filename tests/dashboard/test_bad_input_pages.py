"""Dashboard pages and forms given hostile input answer a 4xx that says what was wrong and
change no row: filters at the calendar's edge, NUL in fields and paths, JSON text areas beyond
the input limits, reserved params in a replay, bodies over the size limit."""

from __future__ import annotations

import json

import pytest
from ledger_factories import make_instance
from test_ops_factories import approval, failed_instance
from workflows_for_tests import DEMO

from ingest.engine.models import Instance
from tests.fuzzing import ledger_counts

pytestmark = pytest.mark.db


@pytest.mark.parametrize(
    "query", ["to=9999-12-31T23:59:59", "from=0001-01-01", "to=9999-12-31", "from=1969-12-31T23:00:00"]
)
def test_a_costs_filter_at_the_calendars_edge_is_a_400_that_says_so(operator, query):
    response = operator.get(f"/costs/?{query}")
    assert response.status_code == 400
    text = response.content.decode()
    assert "outside the times a filter can name" in text and "1970-01-01 to 3000-01-01" in text


def test_a_costs_filter_inside_the_range_still_works(operator):
    assert operator.get("/costs/?from=2026-01-01&to=2026-01-31").status_code == 200


@pytest.mark.parametrize(
    "query", ["since=9999-12-31T23:59", "until=0001-01-01T00:00", "since=9999-12-31T23:59:59-01:00"]
)
def test_an_instance_list_filter_at_the_calendars_edge_is_a_400(operator, query):
    response = operator.get(f"/instances/?{query}")
    assert response.status_code == 400 and b"outside the times a filter can name" in response.content


def test_a_nul_in_a_url_path_or_form_field_is_a_400_inside_the_layout(operator):
    inst = make_instance("acme-nul", workflow=DEMO, status="errored")
    page = operator.get("/instances/acme%00nul/")
    assert page.status_code == 400 and b"URL path" in page.content
    before = ledger_counts()
    form = operator.post(f"/instances/{inst.id}/actions/pause/run/", {"reason": "why\x00not"})
    assert form.status_code == 400 and "form field &#x27;reason&#x27;" in form.content.decode()
    assert form["Content-Type"].startswith("text/html") and b'aria-label="Main"' in form.content
    assert ledger_counts() == before


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ('{"a": "\\u0000"}', "NUL character"),
        ('{"a": "\\ud800"}', "lone surrogate"),
        ('{"a": ' + "9" * 5000 + "}", "5,000 digits"),
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "more than 32 levels"),
        ('{"_schedule": {"manual": true}}', "'_schedule' is reserved"),
    ],
)
def test_the_replay_form_refuses_params_beyond_the_limits(operator, params, says):
    inst = make_instance("acme-src", workflow=DEMO, status="errored", params={"a": 1})
    before = ledger_counts()
    response = operator.post(
        f"/instances/{inst.id}/actions/replay/run/", {"reason": "x", "params": params, "confirm": "True"}
    )
    assert response.status_code == 400
    assert says in response.content.decode().replace("&#x27;", "'")
    assert ledger_counts() == before


def test_the_dead_letter_replay_form_applies_the_same_limits(operator):
    dl = failed_instance(tenant="acme", params={"a": 1})
    before = ledger_counts()
    response = operator.post(
        f"/dead-letters/{dl.id}/replay/run/",
        {"reason": "x", "params": '{"a": ' + "[" * 5000 + "]" * 5000 + "}", "confirm": "1"},
    )
    assert response.status_code == 400 and "more than 32 levels" in response.content.decode()
    assert ledger_counts() == before


def test_a_replay_of_a_scheduled_instance_keeps_its_schedule_unchanged(operator):
    fired = {"cron": "* * * * *", "timezone": "UTC", "scheduled_time": "2026-01-01T00:00:00Z", "manual": False}
    inst = make_instance("acme-fired", workflow=DEMO, status="errored", params={"a": 1, "_schedule": fired})
    params = json.dumps({"a": 2, "_schedule": fired})
    response = operator.post(
        f"/instances/{inst.id}/actions/replay/run/", {"reason": "x", "params": params, "confirm": "True"}
    )
    assert response.status_code == 303
    assert Instance.objects.get(replay_of_id="acme-fired").params["_schedule"] == fired


def test_an_approval_number_of_thousands_of_digits_is_a_form_error(operator):
    req = approval(fields=[{"name": "facts", "type": "number", "required": True}])
    before = ledger_counts()
    response = operator.post(f"/approvals/{req.id}/answer/", {"decision": "approve", "f_facts": "9" * 5000})
    assert response.status_code == 400 and "f_facts" in response.context["form"].errors
    assert ledger_counts() == before


def test_a_form_body_over_the_size_limit_is_a_413(operator):
    inst = make_instance("acme-big", workflow=DEMO, status="errored")
    response = operator.post(f"/instances/{inst.id}/actions/pause/run/", {"reason": "x" * (1024 * 1024 + 10)})
    assert response.status_code == 413 and b"1,048,576 bytes" in response.content


def test_the_dead_letter_search_finds_by_instance_id_prefix(operator):
    dl = failed_instance(tenant="acme")
    response = operator.get(f"/dead-letters/?q={dl.instance_id[:6]}")
    assert response.status_code == 200
    assert dl.signature in response.content.decode()
    assert dl.signature not in operator.get("/dead-letters/?q=zzz-no-such").content.decode()


@pytest.mark.parametrize("path", ["/dead-letters/redrive/run/", "/dead-letters/redrive/"])
def test_a_dead_letter_id_of_thousands_of_digits_is_a_400(operator, path):
    failed_instance(tenant="acme")
    before = ledger_counts()
    data = {"ids": "9" * 5000, "reason": "x", "rate_per_second": "1"}
    response = operator.post(path, data) if path.endswith("run/") else operator.get(path, data)
    assert response.status_code == 400 and b"too long to be a dead letter id" in response.content
    assert ledger_counts() == before
