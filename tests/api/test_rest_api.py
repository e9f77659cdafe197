"""The REST API from the outside: tokens, tenant scoping from three sides, engine errors → 4xx."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client

from ingest.engine.models import Instance
from ingest.engine.services import instances as engine_services
from ingest.engine.worker.turns import run_until_idle
from ingest.triggers.services import schedule_create, subscription_create
from tests.api.conftest import ApiClient

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def code(response: Any) -> str:
    return response.json()["error"]["code"]


def start(client: ApiClient, **body: Any) -> Any:
    return client.post("/api/instances", {"workflow": "test-echo", "tenant": "acme", **body})


def test_no_token_or_a_bad_token_is_401(db: Any) -> None:
    response = Client().get("/api/instances")
    assert response.status_code == 401 and code(response) == "not_authenticated"
    response = Client().get("/api/instances", headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401


def test_an_invalid_host_header_is_a_json_400_on_the_api_and_an_html_400_elsewhere(db: Any) -> None:
    # Found by the schema fuzzer: Django refuses the Host before any view, with its HTML page.
    response = Client().get("/api/instances", headers={"Host": "0007_fact_head"})
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json" and code(response) == "bad_request"
    assert "0007_fact_head" not in response.content.decode()
    page = Client().get("/instances/", headers={"Host": "0007_fact_head"})
    assert page.status_code == 400 and page["Content-Type"].startswith("text/html")


def test_an_operator_starts_gets_and_lists_instances(operator: ApiClient) -> None:
    created = start(operator, id="order-1", params={"n": 1})
    assert created.status_code == 201 and created.json()["status_url"] == "/api/instances/order-1"
    run_until_idle()
    detail = operator.get("/api/instances/order-1").json()
    assert detail["status"] == "complete" and detail["output"] == {"got": {"n": 1}}
    assert detail["steps"][0]["name"] == "echo" and detail["steps"][0]["attempts"][0]["ok"]
    listed = operator.get("/api/instances", workflow="test-echo", status="complete").json()
    assert [i["id"] for i in listed["items"]] == ["order-1"]
    history = operator.get("/api/instances/order-1/history").json()["items"]
    assert history[0]["kind"] == "instance.created" and history[0]["actor"] == "api:op"


def test_an_instance_starts_with_its_search_attributes_and_bad_ones_start_nothing(operator: ApiClient) -> None:
    from ingest.engine.models import InstanceAttributes

    created = start(
        operator, id="tagged-1", search_attributes={"customer": "acme", "wave": 3, "paid": True, "score": 0.5}
    )
    assert created.status_code == 201, created.content
    assert InstanceAttributes.objects.get(instance_id="tagged-1").attributes == {
        "customer": "acme",
        "wave": "3",
        "paid": "true",
        "score": "0.5",
    }
    listed = operator.get("/api/instances", attr="wave>=3").json()
    assert [i["id"] for i in listed["items"]] == ["tagged-1"]
    for bad in (
        {"Customer": "x"},
        {"customer": None},
        {"customer": ["a"]},
        {"customer": "x" * 201},
        {f"k{n}": "v" for n in range(21)},
    ):
        refused = start(operator, id="tagged-2", search_attributes=bad)
        assert refused.status_code == 422 and code(refused) == "validation_error", (bad, refused.content)
    assert not Instance.objects.filter(pk="tagged-2").exists()
    assert InstanceAttributes.objects.count() == 1


def test_the_list_pages_with_a_keyset_cursor_and_filters(operator: ApiClient) -> None:
    for n in range(5):
        start(operator, id=f"page-{n}")
    start(operator, id="other-1")
    first = operator.get("/api/instances", limit=2, id_prefix="page-").json()
    second = operator.get("/api/instances", limit=2, id_prefix="page-", cursor=first["next_cursor"]).json()
    third = operator.get("/api/instances", limit=2, id_prefix="page-", cursor=second["next_cursor"]).json()
    ids = [i["id"] for page in (first, second, third) for i in page["items"]]
    assert sorted(ids) == [f"page-{n}" for n in range(5)] and third["next_cursor"] is None
    bad = operator.get("/api/instances", cursor="!!!")
    assert bad.status_code == 404 and code(bad) == "cursor_not_found"  # opaque: a page that is not there


def test_the_list_filters_by_every_search_attribute_given_and_sorts_by_one(
    operator: ApiClient, stranger: ApiClient
) -> None:
    from ingest.engine.services.attributes import attributes_set

    tags = {
        "t-1": {"customer": "acme", "domain": "a.com"},
        "t-2": {"customer": "acme", "domain": "b.com"},
        "t-3": {"customer": "initech", "domain": "a.com"},
        "t-4": {"customer": "acme", "domain": "c.com"},
    }
    for instance_id, values in tags.items():
        start(operator, id=instance_id)
        attributes_set(instance_id=instance_id, values=values)
    start(operator, id="t-untagged")

    def ids(**params: Any) -> list[str]:
        response = operator.get("/api/instances", **params)
        assert response.status_code == 200, response.content
        return [i["id"] for i in response.json()["items"]]

    assert sorted(ids(attr="customer:acme")) == ["t-1", "t-2", "t-4"]
    assert ids(attr=["customer:acme", "domain:a.com"]) == ["t-1"]
    assert ids(attr=["customer:acme", "domain:a.com"], status="complete") == []
    assert ids(attr="customer:acme", sort="-attr.domain") == ["t-4", "t-2", "t-1"]
    assert ids(attr="customer:nobody") == []
    # The value rows follow a change of the attributes: t-2 leaves acme, t-untagged joins it.
    attributes_set(instance_id="t-2", values={"customer": "globex"})
    attributes_set(instance_id="t-untagged", values={"customer": "acme"})
    assert sorted(ids(attr="customer:acme")) == ["t-1", "t-4", "t-untagged"]
    assert stranger.get("/api/instances", attr="customer:acme").json()["items"] == []


def test_a_viewer_reads_but_cannot_act(operator: ApiClient, viewer: ApiClient) -> None:
    start(operator, id="v-1")
    assert viewer.get("/api/instances/v-1").status_code == 200
    response = viewer.post("/api/instances/v-1/pause", {"reason": "no"})
    assert response.status_code == 403 and code(response) == "forbidden"
    assert start(viewer).status_code == 403


def test_a_stranger_sees_nothing_of_another_tenant(operator: ApiClient, stranger: ApiClient) -> None:
    start(operator, id="s-1")
    assert stranger.get("/api/instances").json()["items"] == []
    assert stranger.get("/api/instances/s-1").status_code == 404
    response = stranger.post("/api/instances/s-1/terminate", {})
    assert response.status_code == 404 and code(response) == "instance_not_found"
    assert start(stranger).status_code == 404  # tenant acme is not visible to it


def test_control_actions_and_engine_errors_become_4xx(operator: ApiClient) -> None:
    start(operator, id="c-1", params={})
    assert operator.post("/api/instances/c-1/pause", {"reason": "look"}).status_code == 200
    assert Instance.objects.get(pk="c-1").status == "paused"
    assert operator.post("/api/instances/c-1/resume", {}).status_code == 200
    assert operator.post("/api/instances/c-1/terminate", {}).json()["status"] == "terminated"
    again = operator.post("/api/instances/c-1/pause", {})
    assert again.status_code == 409
    duplicate = start(operator, id="c-1")
    assert duplicate.status_code == 409 and code(duplicate) == "instance_already_exists"
    unknown = operator.post("/api/instances", {"workflow": "nope", "tenant": "acme"})
    assert unknown.status_code == 404 and code(unknown) == "unknown_workflow"
    assert operator.post("/api/instances/c-1/replay", {"params": {"x": 1}}).status_code == 201
    restart = operator.post("/api/instances/c-1/restart", {"from_step": "no-such-step"})
    assert 400 <= restart.status_code < 500


def test_schema_errors_are_422_with_details(operator: ApiClient) -> None:
    response = operator.post("/api/instances", {"workflow": "test-echo", "id": "bad id!"})
    assert response.status_code == 422 and code(response) == "validation_error"
    assert "id" in response.json()["error"]["message"]


def test_events_are_sent_and_published(operator: ApiClient, stranger: ApiClient) -> None:
    engine_services.instance_create(workflow="test-waiter", id="w-1", tenant="acme")
    sent = operator.post("/api/instances/w-1/events", {"type": "go", "payload": {"ok": True}})
    assert sent.status_code == 202
    run_until_idle()
    assert Instance.objects.get(pk="w-1").status == "complete"
    subscription_create(workflow="test-echo", pattern="user.*")
    published = operator.post(
        "/api/events", {"type": "user.created", "data": {"a": 1}, "tenant": "acme", "id": "e-1"}
    ).json()
    assert len(published["started"]) == 1 and published["duplicate"] is False
    assert (
        operator.post("/api/events", {"type": "user.created", "tenant": "acme", "id": "e-1"}).json()["duplicate"]
        is True
    )
    assert stranger.post("/api/events", {"type": "user.created", "tenant": "acme"}).status_code == 404


def test_workflows_dead_letters_costs_budgets(operator: ApiClient, admin: ApiClient, viewer: ApiClient) -> None:
    names = [w["name"] for w in operator.get("/api/workflows").json()]
    assert "test-echo" in names
    assert operator.get("/api/workflows/test-echo").json()["name"] == "test-echo"
    assert operator.get("/api/workflows/nope").status_code == 404
    assert operator.get("/api/dead-letters").json() == []
    refused = operator.post("/api/dead-letters/redrive", {"reason": "fixed"})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "empty_selection"
    preview = operator.post("/api/dead-letters/redrive/preview", {"filter": {}}).json()
    assert preview["count"] == 0
    assert operator.post(
        "/api/dead-letters/redrive", {"filter": {}, "token": preview["token"], "reason": "fixed"}
    ).json() == {"redriven": 0}
    assert operator.get("/api/costs").json()["total"] in ("0", "0.000000", 0)
    put = operator.put("/api/budgets", {"scope": "tenant", "key": "acme", "period": "day", "limit": "12.5"})
    assert put.status_code == 200 and put.json()["key"] == "acme"
    assert (
        viewer.put("/api/budgets", {"scope": "tenant", "key": "acme", "period": "day", "limit": "1"}).status_code == 403
    )
    assert (
        operator.put("/api/budgets", {"scope": "service", "key": "openai", "period": "day", "limit": "1"}).status_code
        == 403
    )
    assert (
        admin.put("/api/budgets", {"scope": "service", "key": "openai", "period": "day", "limit": "1"}).status_code
        == 200
    )
    assert {b["key"] for b in viewer.get("/api/budgets").json()} == {"acme", "openai"}


def test_schedules_list_run_now_and_toggle(operator: ApiClient, viewer: ApiClient, stranger: ApiClient) -> None:
    schedule_create(
        name="nightly",
        workflow="test-echo",
        cron_expression="0 3 * * *",
        tenant="acme",
        now=datetime(2026, 11, 22, tzinfo=UTC),
    )
    rows = operator.get("/api/schedules").json()
    assert rows[0]["name"] == "nightly" and len(rows[0]["next_fires"]) == 3
    assert stranger.get("/api/schedules").json() == []
    assert viewer.post("/api/schedules/nightly/run").status_code == 403
    ran = operator.post("/api/schedules/nightly/run")
    assert ran.status_code == 201 and Instance.objects.filter(pk=ran.json()["instance_id"]).exists()
    assert operator.post("/api/schedules/nightly/disable").json()["enabled"] is False
    assert operator.post("/api/schedules/nightly/enable").json()["enabled"] is True
    assert operator.get("/api/schedules/nope").status_code == 404


def test_the_openapi_schema_is_served(db: Any) -> None:
    schema = Client().get("/api/openapi.json").json()
    assert schema["info"]["title"] == "Runledger API"
    assert "/api/instances/{instance_id}/retry" in schema["paths"]


def test_starting_an_instance_is_documented_with_request_examples_that_fit_its_schema(db: Any) -> None:
    schema = Client().get("/api/openapi.json").json()
    body = schema["paths"]["/api/instances"]["post"]["requestBody"]["content"]["application/json"]
    examples = body["examples"]
    assert {"start", "minimal"} <= set(examples)
    ref = body["schema"]["$ref"].rsplit("/", 1)[-1]
    model = schema["components"]["schemas"][ref]
    for example in examples.values():
        value = example["value"]
        assert set(value) <= set(model["properties"]) and set(model.get("required", [])) <= set(value)
        assert isinstance(value["params"], dict)
