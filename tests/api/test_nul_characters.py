"""A NUL character in a request is a 400 naming the field, never a database error (dashboard/guard.py)."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client

from ingest.engine.models import Instance
from tests.api.conftest import ApiClient


def test_a_nul_in_a_query_parameter_is_a_400_in_the_api_envelope(operator: ApiClient) -> None:
    response = operator.get("/api/dead-letters", tenant="ac\x00me")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "nul_character"
    assert "query parameter 'tenant'" in error["message"]
    assert operator.get("/api/dead-letters", tenant="acme").status_code == 200


def test_a_nul_inside_a_json_body_is_a_400_and_nothing_is_created(operator: ApiClient) -> None:
    response = operator.post(
        "/api/instances", {"workflow": "test-echo", "tenant": "acme", "id": "nul-1", "params": {"note": "a\x00b"}}
    )
    assert response.status_code == 400
    assert "JSON body" in response.json()["error"]["message"]
    assert not Instance.objects.filter(pk="nul-1").exists()


def test_the_escaped_text_backslash_u0000_is_not_a_nul(operator: ApiClient) -> None:
    body = {"workflow": "test-echo", "tenant": "acme", "id": "nul-2", "params": {"note": "\\u0000"}}
    assert "\\\\u0000" in json.dumps(body)  # a backslash, then the letters u0000
    response = operator.post("/api/instances", body)
    assert response.status_code == 201, response.content
    assert Instance.objects.get(pk="nul-2").params == {"note": "\\u0000"}


def test_a_nul_in_a_dashboard_filter_is_a_400_page_that_names_it(db: Any) -> None:
    response = Client().get("/instances/", {"q": "x\x00"})
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert "query parameter &#x27;q&#x27;" in response.content.decode()
