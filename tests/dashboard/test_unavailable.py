"""The database timing out, refusing writes or gone: the web answers 503 with a page that says
so, and JSON under /api/ and the hooks, instead of a bare 500."""

from __future__ import annotations

import json

import psycopg
import pytest
from django.db import InterfaceError, OperationalError, connection
from django.http import HttpResponse
from django.test import RequestFactory

from dashboard.unavailable import DatabaseUnavailableMiddleware


def answer(path: str, exc: Exception) -> HttpResponse:
    request = RequestFactory().get(path)
    middleware = DatabaseUnavailableMiddleware(lambda r: HttpResponse("never"))
    response = middleware.process_exception(request, exc)
    assert response is not None
    return response


@pytest.mark.pure
def test_a_page_whose_query_fails_on_the_database_answers_503_with_a_page_saying_so():
    response = answer("/instances/", OperationalError("canceling statement due to statement timeout"))
    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/html")
    assert response["Retry-After"] == "5"
    body = response.content.decode()
    assert "database" in body.lower() and "try again" in body.lower()
    assert "statement timeout" not in body  # the server's words stay in the log


@pytest.mark.pure
@pytest.mark.parametrize("path", ["/api/instances", "/hooks/gong/acme"])
def test_the_api_and_the_hooks_answer_503_as_json(path):
    response = answer(path, InterfaceError("connection already closed"))
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    error = json.loads(response.content)["error"]
    assert error["code"] == "database_unavailable"
    assert "database" in error["message"]


@pytest.mark.pure
def test_other_errors_are_left_to_django():
    request = RequestFactory().get("/instances/")
    middleware = DatabaseUnavailableMiddleware(lambda r: HttpResponse("never"))
    assert middleware.process_exception(request, ValueError("a bug")) is None


@pytest.fixture
def locked_instances(require_postgres, transactional_db):
    """Another session holds engine_instance exclusively; this one gives up on a statement after
    200 ms: every read of the instances times out, as on a database that hangs."""
    params = connection.get_connection_params()
    holder = psycopg.connect(
        host=params.get("host"),
        port=params.get("port"),
        user=params.get("user"),
        password=params.get("password"),
        dbname=params.get("dbname") or params.get("database"),
    )
    holder.execute("LOCK TABLE engine_instance IN ACCESS EXCLUSIVE MODE")
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 200")
    yield
    holder.rollback()
    holder.close()
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")


@pytest.mark.postgres
@pytest.mark.db
def test_a_page_on_a_hanging_database_answers_503(operator, locked_instances):
    response = operator.get("/instances/")
    assert response.status_code == 503
    assert "database" in response.content.decode().lower()


@pytest.mark.postgres
@pytest.mark.db
def test_the_api_on_a_hanging_database_answers_503_json(locked_instances):
    from dashboard.models import Role
    from tests.api.conftest import persona

    client = persona("api-op", [("acme", Role.OPERATOR)])
    # The token is checked first (not locked): the request reaches the instances' query.
    response = client.get("/api/instances")
    assert response.status_code == 503
    assert json.loads(response.content)["error"]["code"] == "database_unavailable"
