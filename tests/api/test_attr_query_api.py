"""GET /api/instances reads the search-attribute grammar of the console's list (one parser,
dashboard/attr_query.py): OR, ranges, negation; a bad term is a JSON 400 naming it; `top_level`
and `parent` split fan-out items from the runs that started them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from ingest.engine.models import FanOut, FanOutItem, Step
from ingest.engine.services.attributes import attributes_set
from tests.api.conftest import ApiClient
from tests.dashboard.ledger_factories import T0, make_instance

pytestmark = [pytest.mark.db, pytest.mark.django_db]


@pytest.fixture
def ledger(db: Any) -> None:
    parent = make_instance("run-1", created_at=T0)
    make_instance("run-2", created_at=T0 + timedelta(minutes=1))
    step = Step.objects.create(
        instance=parent, name="fan", seq=1, position=1, kind="fan_out", status="waiting", started_at=T0
    )
    fan = FanOut.objects.create(
        instance=parent,
        step=step,
        step_name="fan",
        handler="url-classify",
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
    attributes_set(instance_id="run-1", values={"customer": "acme", "amount": "120"})
    attributes_set(instance_id="run-2", values={"customer": "globex", "amount": "30", "region": "eu"})
    attributes_set(instance_id=item.id, values={"customer": "acme", "amount": "5"})


def _ids(client: ApiClient, **params: Any) -> list[str]:
    response = client.get("/api/instances", **params)
    assert response.status_code == 200, response.content
    return [i["id"] for i in response.json()["items"]]


def test_the_api_reads_or_ranges_and_negation(operator: ApiClient, ledger: None) -> None:
    assert _ids(operator, attr="customer:acme|globex", top_level="true") == ["run-2", "run-1"]
    assert _ids(operator, attr="amount>=100") == ["run-1"]
    assert _ids(operator, attr="amount:1..50") == [f"_fo{FanOut.objects.get().id}-0", "run-2"]
    assert _ids(operator, attr="!region:eu", top_level="true") == ["run-1"]
    assert _ids(operator, attr=["customer:acme", "amount<10"]) == [f"_fo{FanOut.objects.get().id}-0"]


def test_the_api_lists_items_unless_asked_for_top_level_runs_or_one_parent(operator: ApiClient, ledger: None) -> None:
    item = f"_fo{FanOut.objects.get().id}-0"
    assert _ids(operator) == [item, "run-2", "run-1"]
    assert _ids(operator, top_level="true") == ["run-2", "run-1"]
    assert _ids(operator, parent="run-1") == [item]


@pytest.mark.parametrize(
    ("attr", "named"),
    [
        ("amount>=lots", "'lots' is not a number"),
        ("amount:9..1", "is empty"),
        ("Region:eu", "does not start with a key"),
        ("customer:a||b", "empty value"),
    ],
)
def test_a_bad_term_is_a_json_400_that_names_it(operator: ApiClient, ledger: None, attr: str, named: str) -> None:
    response = operator.get("/api/instances", attr=attr)
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "invalid_filter" and named in error["message"] and attr in error["message"]


def test_a_stranger_sees_no_item_of_another_tenant(stranger: ApiClient, ledger: None) -> None:
    assert _ids(stranger, parent="run-1") == [] and _ids(stranger, attr="customer:acme|globex") == []
