"""The instances list's filters: several statuses, sort, counts, partial workflow names, `?step=`,
search attributes, and values that do not parse (nothing listed, never a wider list)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.http import QueryDict
from ledger_factories import T0, make_instance

from dashboard.selectors import InstanceFilters
from ingest.engine.models import InstanceAttributes, Step
from ingest.engine.services.attributes import attributes_set

pytestmark = pytest.mark.db

ROW = re.compile(r'<tr id="row-([^"]+)"')


def _ids(response) -> list[str]:
    return ROW.findall(response.content.decode())


@pytest.fixture
def api_operator(users):
    from dashboard.models import Role
    from tests.api.conftest import persona

    return persona("api-op", [("acme", Role.OPERATOR)])


@pytest.fixture
def ledger(users):
    rows = {
        "a": make_instance(
            "a", status="errored", workflow="gong-ingest", created_at=T0, ended_at=T0 + timedelta(seconds=50)
        ),
        "b": make_instance("b", status="running", workflow="gong-ingest", created_at=T0 + timedelta(minutes=1)),
        "c": make_instance(
            "c",
            status="complete",
            workflow="salesforce-ingest",
            created_at=T0 + timedelta(minutes=2),
            ended_at=T0 + timedelta(minutes=2, seconds=5),
        ),
        "d": make_instance("d", status="paused", workflow="domain-onboard", created_at=T0 + timedelta(minutes=3)),
        "x": make_instance("x", status="errored", tenant="initech", created_at=T0 + timedelta(minutes=4)),
    }
    attributes_set(instance_id="a", values={"customer": "acme-co", "domain": "acme.com"})
    attributes_set(instance_id="c", values={"customer": "zeta", "domain": "acme.com"})
    attributes_set(instance_id="x", values={"customer": "acme-co"})  # another tenant: never shown to operator
    Step.objects.create(instance=rows["c"], name="llm-extract", seq=1, position=1, status="complete", started_at=T0)
    return rows


def test_several_statuses_at_once_list_each_of_them_and_nothing_else(operator, ledger):
    r = operator.get("/instances/?status=errored&status=paused")
    assert _ids(r) == ["d", "a"]
    assert re.search(r"<strong>2</strong> instances match", r.content.decode())


def test_the_total_count_is_shown_and_counts_only_the_users_tenants(operator, ledger):
    body = operator.get("/instances/").content.decode()
    assert re.search(r'id="result-count"><strong>4</strong> instances in your tenants', body)


def test_a_part_of_a_workflow_name_matches(operator, ledger):
    assert sorted(_ids(operator.get("/instances/?workflow=ingest"))) == ["a", "b", "c"]
    assert _ids(operator.get("/instances/?workflow=onboard")) == ["d"]


def test_step_from_the_workflow_graph_narrows_to_instances_that_have_that_step(operator, ledger):
    assert _ids(operator.get("/instances/?step=llm-extract")) == ["c"]
    assert _ids(operator.get("/instances/?step=no-such-step")) == []


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("-created", ["d", "c", "b", "a"]),
        ("created", ["a", "b", "c", "d"]),
        ("-started", ["d", "c", "b", "a"]),
        ("duration", ["c", "a", "d", "b"]),  # unfinished runs last measured until now: b started first
        ("attr.customer", ["a", "c", "d", "b"]),  # instances without the attribute come last
        ("-attr.customer", ["c", "a", "d", "b"]),
    ],
)
def test_the_list_sorts_by_the_chosen_column(operator, ledger, sort, expected):
    assert _ids(operator.get(f"/instances/?sort={sort}")) == expected


def test_search_attributes_filter_the_list_and_stay_in_the_url(operator, ledger):
    r = operator.get("/instances/?attr=domain:acme.com&sort=attr.customer")
    assert _ids(r) == ["a", "c"]
    body = r.content.decode()
    assert 'value="domain:acme.com"' in body  # the form shows the filter it lists
    assert "customer:acme-co" in body  # the row shows its attributes
    assert _ids(operator.get("/instances/?attr=domain:acme.com+customer:zeta")) == ["c"]
    assert _ids(operator.get("/instances/?attr=customer:acme-co")) == ["a"]  # x is another tenant's


def test_values_that_do_not_parse_list_nothing_and_say_why(operator, ledger):
    for query, word in [("status=erored", "erored"), ("attr=Customer", "Customer"), ("sort=bogus", "bogus")]:
        r = operator.get(f"/instances/?{query}")
        assert r.status_code == 400
        assert _ids(r) == []
        assert word in r.content.decode()


def test_filters_write_back_the_query_they_were_read_from():
    q = QueryDict("workflow=gong&status=errored&status=paused&attr=customer:acme&step=llm-extract&sort=-duration")
    f = InstanceFilters.from_query(q)
    assert f.problems == ()
    assert InstanceFilters.from_query(QueryDict(f.querystring())) == f


def test_attributes_merge_and_none_removes_a_key(users):
    make_instance("m")
    attributes_set(instance_id="m", values={"customer": "acme", "call_id": 42, "vip": True})
    attributes_set(instance_id="m", values={"call_id": None, "domain": "acme.com"})
    assert InstanceAttributes.objects.get(instance_id="m").attributes == {
        "customer": "acme",
        "vip": "true",
        "domain": "acme.com",
    }


def test_the_api_lists_by_statuses_attributes_and_sort(ledger, api_operator):
    r = api_operator.get("/api/instances?status=errored,paused&attr=domain:acme.com")
    assert r.status_code == 200, r.content
    assert [i["id"] for i in r.json()["items"]] == ["a"]
    assert r.json()["items"][0]["search_attributes"] == {"customer": "acme-co", "domain": "acme.com"}
    r = api_operator.get("/api/instances?sort=attr.customer&status=errored,running,complete")
    assert [i["id"] for i in r.json()["items"]] == ["a", "c", "b"]
    bad = api_operator.get("/api/instances?attr=nocolon")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_filter"
