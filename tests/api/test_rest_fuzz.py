"""Hypothesis over the REST API beyond its schema: hostile JSON bodies, content types, query
strings and path parameters, as an operator. Never a 5xx, always the JSON envelope, and a
refused request changes no row (tests/fuzzing.py). Schemathesis covers the schema's own cases."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.engine.services import instances as engine_services
from ingest.triggers.models import Schedule
from tests.api.conftest import ApiClient
from tests.fuzzing import (
    NASTY_TEXT,
    answered,
    content_types,
    fuzz,
    hostile_body,
    json_values,
    raw_json,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db]

POSTS = [
    "/api/instances",
    "/api/instances/{id}/pause",
    "/api/instances/{id}/resume",
    "/api/instances/{id}/terminate",
    "/api/instances/{id}/restart",
    "/api/instances/{id}/retry",
    "/api/instances/{id}/replay",
    "/api/instances/{id}/events",
    "/api/events",
    "/api/dead-letters/redrive",
    "/api/schedules/{name}/run",
    "/api/schedules/{name}/enable",
    "/api/budgets",
    "/api/schedules",
    "/api/routes",
    "/api/subscriptions",
    "/api/ingress-credentials",
    "/api/ingress-credentials/acme/{name}/rotate",
    "/api/ingress-credentials/acme/{name}/disable",
    "/api/connections",
    "/api/connections/acme/{name}/disable",
    "/api/connections/acme/{name}/test",
]
GETS = [
    "/api/instances",
    "/api/instances/{id}",
    "/api/instances/{id}/history",
    "/api/dead-letters",
    "/api/costs",
    "/api/budgets",
    "/api/schedules",
    "/api/schedules/{name}",
    "/api/workflows",
    "/api/workflows/{name}",
    "/api/connections",
    "/api/connections/acme/{name}",
]
QUERY_KEYS = [
    "workflow",
    "status",
    "tenant",
    "since",
    "until",
    "id_prefix",
    "cursor",
    "limit",
    "after",
    "signature",
    "step",
    "service",
    "scope",
]
query_values = st.sampled_from(
    NASTY_TEXT
    + ["9999-12-31T23:59:59", "0001-01-01T00:00:00+01:00", "-1", "99999999999999999999", "1e999", "NaN", "%00", "true"]
) | st.text(max_size=20)
path_values = st.sampled_from(
    ["fuzz-1", "nope", "%00", "a%00b", "%ED%A0%80", "x" * 400, "..", "%2F", "9" * 5000, "fuzz"]
) | st.text(alphabet="abc-_1%", max_size=12)
FIELDS = [
    "workflow",
    "tenant",
    "id",
    "params",
    "reason",
    "type",
    "payload",
    "data",
    "rollback",
    "from_step",
    "ids",
    "since",
    "until",
    "rate_per_second",
    "scope",
    "key",
    "period",
    "limit",
    "policy",
    "priority",
    "start_at",
    "name",
    "cron",
    "timezone",
    "pattern",
    "filters",
    "enabled",
    "wait_seconds",
    "overlap_seconds",
    "rate_limit_per_minute",
    "coalesce",
    "kind",
    "base_url",
    "secret",
    "refresh_token",
    "webhook_key",
    "provider",
    "model",
    "service",
    "organization_id",
    "options",
    "version",
]


@pytest.fixture
def objects(operator: ApiClient) -> ApiClient:
    from django.utils import timezone

    from ingest.triggers.services import ingress_secret_create, schedule_create

    engine_services.instance_create(workflow="test-echo", id="fuzz-1", tenant="acme")
    ingress_secret_create(tenant="acme", name="fuzz")
    schedule_create(name="fuzz", workflow="test-echo", cron_expression="* * * * *", tenant="acme", now=timezone.now())
    return operator


def call(api: ApiClient, method: str, path: str, body: bytes = b"", content_type: str = "application/json") -> Any:
    if method == "GET":
        return answered("rest", path, lambda: api.client.get(path, headers=api.headers))
    return answered(
        "rest",
        path,
        lambda: api.client.generic(method, path, body, content_type=content_type, headers=api.headers),
        head=method == "HEAD",
    )


def filled(template: str, value: str) -> str:
    return template.replace("{id}", value).replace("{name}", value)


@fuzz(400)
@given(
    template=st.sampled_from(POSTS),
    body=hostile_body,
    content_type=content_types,
    target=st.sampled_from(["fuzz-1", "fuzz", "nope"]),
)
def test_hostile_bodies_to_every_write_endpoint_are_refused_cleanly(
    objects: ApiClient, template: str, body: bytes, content_type: str, target: str
) -> None:
    call(objects, "PUT" if template == "/api/budgets" else "POST", filled(template, target), body, content_type)


@fuzz(400)
@given(
    template=st.sampled_from(POSTS),
    fields=st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6),
    target=st.sampled_from(["fuzz-1", "fuzz"]),
)
def test_well_formed_json_with_hostile_values_is_answered_cleanly(
    objects: ApiClient, template: str, fields: dict[str, Any], target: str
) -> None:
    call(objects, "PUT" if template == "/api/budgets" else "POST", filled(template, target), raw_json(fields))


@fuzz(400)
@given(
    template=st.sampled_from(GETS),
    target=path_values,
    query=st.lists(st.tuples(st.sampled_from(QUERY_KEYS), query_values), max_size=4),
    method=st.sampled_from(["GET", "GET", "GET", "DELETE", "PATCH", "HEAD", "OPTIONS"]),
)
def test_hostile_paths_queries_and_methods_are_answered_cleanly(
    objects: ApiClient, template: str, target: str, query: list[tuple[str, str]], method: str
) -> None:
    qs = "&".join(f"{k}={quote(v, safe='%', errors='surrogatepass')}" for k, v in query)
    path = filled(template, target) + (f"?{qs}" if qs else "")
    # The ledger lives across the examples of one test: a DELETE that an earlier example already
    # sent finds nothing left to delete.
    fuzz_schedule = Schedule.objects.filter(name="fuzz").exists()
    response = call(objects, method, path)
    if method in ("DELETE", "PATCH"):
        # Refused either way: no such object (404), no such method (405), or, for a PATCH of an
        # existing schedule, a missing or malformed body (422, the API's validation error); only
        # the existing schedule itself may be deleted.
        # A query string does not change what a DELETE names: the schedule goes (200) or the
        # query is refused (4xx) and it stays.
        deleting = method == "DELETE" and filled(template, target) == "/api/schedules/fuzz" and fuzz_schedule
        if deleting:
            assert response.status_code in (200, 400, 422)
            assert Schedule.objects.filter(name="fuzz").exists() == (response.status_code != 200)
        else:
            assert response.status_code in (400, 404, 405, 422)
