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
from schemathesis.config import SchemathesisConfig

from tests.fuzzing import IN_CI, check_answer, ledger_counts
from tests.fuzzing import api_fuzz_token as api_token_fuzz

pytestmark = [pytest.mark.db, pytest.mark.django_db]

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# The examples and the fuzzing phases. The coverage phase's thousands of boundary values per
# operation, built at collection in every test process (about 3 minutes of CPU each), are sent
# once, by the strict run (test_openapi_strict.py), with every check and the same refusal contract.
schema = schemathesis.openapi.from_wsgi(
    "/api/openapi.json",
    get_wsgi_application(),
    config=SchemathesisConfig.from_dict({"phases": {"coverage": {"enabled": False}}}),
)


class response_like:  # noqa: N801  (a view of a `requests`-style response for check_answer)
    def __init__(self, response: Any) -> None:
        self.status_code = response.status_code
        self.content = response.content
        self.headers = response.headers

    def __getitem__(self, name: str) -> str:
        value = {k.lower(): v for k, v in dict(self.headers).items()}.get(name.lower(), "")
        return ", ".join(value) if isinstance(value, list) else str(value)


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
    return {"Authorization": f"Bearer {api_token_fuzz('fuzz')}"}


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    derandomize=IN_CI,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_the_api_never_answers_500_and_matches_its_schema(
    case: Any, auth_headers: dict[str, str], bounded_tiles: None
) -> None:
    # Not `negative_data_rejection`: pydantic's lax mode accepts 0.5 as a datetime (unix time),
    # which is a leniency, not a bug.
    before = ledger_counts()
    response = case.call(headers=auth_headers)
    check_answer("rest-schema", case.formatted_path, response_like(response), before)
    case.validate_response(response, checks=CHECKS)


@schema.parametrize()
@settings(
    max_examples=8,
    deadline=None,
    derandomize=IN_CI,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_without_a_token_the_api_answers_401_not_500(case: Any, db: Any, bounded_tiles: None) -> None:
    before = ledger_counts()
    response = case.call(headers={})
    check_answer("rest-schema", case.formatted_path, response_like(response), before)
    case.validate_response(response, checks=[not_a_server_error])
    # Malformed input is refused before authentication (dashboard/guard.py), revealing nothing.
    assert response.status_code in (400, 401, 404, 405, 413, 415, 422), response.text[:300]
