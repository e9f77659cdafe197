"""Schemathesis over the REST API from its own /api/openapi.json: no 500s, responses match."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from dashboard.access import user_ensure
from dashboard.models import Role
from ingest.engine.services import instances as engine_services
from ingest.triggers.services import api_token_create, schedule_create

pytestmark = [pytest.mark.db, pytest.mark.django_db]

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())


@pytest.fixture(autouse=True)
def keep_test_connection() -> Iterator[None]:
    """As Django's test client does: the WSGI handler must not close the test's DB connection."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def auth_headers(db: Any) -> dict[str, str]:
    from django.utils import timezone

    user = user_ensure(username="fuzzer", password="pw", memberships=[("acme", Role.OPERATOR),
                       ("default", Role.OPERATOR)])
    _, token = api_token_create(user=user, name="schemathesis")
    engine_services.instance_create(workflow="test-echo", id="fuzz-1", tenant="acme")
    schedule_create(name="fuzz", workflow="test-echo", cron_expression="* * * * *", tenant="acme",
                    now=timezone.now())
    return {"Authorization": f"Bearer {token}"}


@schema.parametrize()
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
def test_the_api_never_answers_500_and_matches_its_schema(case: Any,
                                                          auth_headers: dict[str, str]) -> None:
    # Not `negative_data_rejection`: pydantic's lax mode accepts 0.5 as a datetime (unix time),
    # which is a leniency, not a bug.
    case.call_and_validate(headers=auth_headers, checks=CHECKS)


@schema.parametrize()
@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_without_a_token_the_api_answers_401_not_500(case: Any, db: Any) -> None:
    response = case.call(headers={})
    case.validate_response(response, checks=[not_a_server_error])
    # A NUL character is refused before authentication (dashboard/nul.py), revealing nothing.
    refused_nul = response.status_code == 400 and response.json()["error"]["code"] == "nul_character"
    assert response.status_code in (401, 404, 405, 422) or refused_nul
