"""Bad input to the REST API is a 4xx in the JSON envelope that says what was wrong, and
changes no row (dashboard/guard.py, ingest/triggers/limits.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from ingest.engine.models import Instance
from ingest.engine.services import instances as engine_services
from tests.api.conftest import ApiClient
from tests.fuzzing import ledger_counts

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def post_raw(api: ApiClient, path: str, body: bytes, content_type: str = "application/json") -> Any:
    return api.client.post(path, data=body, content_type=content_type, headers=api.headers)


def error_of(response: Any, status: int) -> dict[str, str]:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    error: dict[str, str] = response.json()["error"]
    return error


def start_body(params: Any) -> bytes:
    return json.dumps({"workflow": "test-echo", "tenant": "acme", "id": "bad-1", "params": params}).encode()


@pytest.mark.parametrize(
    ("raw", "code", "says"),
    [
        (start_body({"note": "\x00"}), "nul_character", "NUL"),
        (start_body({"note\x00": 1}), "nul_character", "a key of"),
        (start_body({"note": "\ud800"}), "invalid_unicode", "\\ud800"),
        (
            b'{"workflow": "test-echo", "tenant": "acme", "params": {"n": ' + b"9" * 5000 + b"}}",
            "number_too_long",
            "5,000 digits",
        ),
        (
            b'{"workflow": "test-echo", "params": {"n": ' + b"[" * 50_000 + b"]" * 50_000 + b"}}",
            "too_deep",
            "more than 32 levels",
        ),
        (b'{"workflow": "test-echo", "params": {"n": NaN}}', "malformed_json", "NaN"),
        (b'{"workflow": "test-echo", "params": {"n": 1e999}}', "number_too_long", "double"),
        (start_body({"s": "x" * 300_000}), "string_too_long", "300,000 characters"),
        (start_body({"l": list(range(10_001))}), "too_many_items", "10,001 items"),
    ],
)
def test_a_json_body_beyond_the_limits_is_a_400_naming_the_fault(
    operator: ApiClient, raw: bytes, code: str, says: str
) -> None:
    before = ledger_counts()
    error = error_of(post_raw(operator, "/api/instances", raw), 413 if code == "body_too_large" else 400)
    assert error["code"] == code
    assert says in error["message"]
    assert ledger_counts() == before


def test_the_lone_surrogate_body_really_carries_the_escape(operator: ApiClient) -> None:
    raw = b'{"workflow": "test-echo", "tenant": "acme", "params": {"note": "\\ud800"}}'
    assert error_of(post_raw(operator, "/api/instances", raw), 400)["code"] == "invalid_unicode"
    assert not Instance.objects.exists()


def test_json_sent_as_text_plain_is_a_415_not_silently_accepted(operator: ApiClient) -> None:
    error = error_of(post_raw(operator, "/api/instances", start_body({"a": 1}), "text/plain"), 415)
    assert error["code"] == "unsupported_media_type"
    assert "application/json" in error["message"]
    assert not Instance.objects.exists()
    # with a NUL inside it is still refused, never reaches the database
    assert post_raw(operator, "/api/instances", start_body({"a": "\x00"}), "text/plain").status_code == 415


def test_a_body_over_the_size_limit_is_a_413_before_it_is_read(operator: ApiClient) -> None:
    big = start_body({"s": "x" * (1024 * 1024)})
    error = error_of(post_raw(operator, "/api/instances", big), 413)
    assert error["code"] == "body_too_large" and "1,048,576 bytes" in error["message"]
    assert not Instance.objects.exists()


def test_the_size_limit_is_a_setting(operator: ApiClient, settings: Any) -> None:
    settings.RUNLEDGER_MAX_BODY_BYTES = 2048
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    error = error_of(post_raw(operator, "/api/instances", start_body({"s": "x" * 3000})), 413)
    assert "2,048 bytes" in error["message"]
    assert post_raw(operator, "/api/instances", start_body({"s": "x"})).status_code == 201


def test_a_nul_in_a_url_path_parameter_is_a_400(operator: ApiClient) -> None:
    error = error_of(operator.get("/api/instances/abc%00def"), 400)
    assert error["code"] == "nul_character" and "URL path" in error["message"]
    assert error_of(operator.post("/api/instances/abc%00def/pause", {"reason": "x"}), 400)


def test_unknown_paths_wrong_methods_and_missing_tokens_answer_in_the_envelope(operator: ApiClient) -> None:
    missing = error_of(operator.get("/api/no-such-thing"), 404)
    assert missing["code"] == "not_found" and "/api/no-such-thing" in missing["message"]
    not_allowed = operator.client.delete("/api/instances", headers=operator.headers)
    error = error_of(not_allowed, 405)
    assert error["code"] == "method_not_allowed" and "DELETE" in error["message"]
    assert "GET" in not_allowed["Allow"]
    assert error_of(Client().get("/api/instances"), 401)["code"] == "not_authenticated"


def test_reserved_params_cannot_be_set_by_a_caller(operator: ApiClient) -> None:
    for key in ("_schedule", "_event"):
        error = error_of(
            operator.post(
                "/api/instances", {"workflow": "test-echo", "tenant": "acme", "params": {key: {"manual": True}}}
            ),
            400,
        )
        assert error["code"] == "reserved_param" and repr(key) in error["message"]
    assert not Instance.objects.exists()
    error = error_of(
        operator.post("/api/events", {"type": "user.created", "tenant": "acme", "data": {"_schedule": {}}}), 400
    )
    assert "'_schedule'" in error["message"]


def test_a_replay_keeps_the_original_reserved_value_but_cannot_forge_one(operator: ApiClient) -> None:
    fired = {"cron": "* * * * *", "timezone": "UTC", "scheduled_time": "2026-01-01T00:00:00Z", "manual": False}
    engine_services.instance_create(
        workflow="test-echo", id="fired-1", tenant="acme", params={"a": 1, "_schedule": fired}
    )
    kept = operator.post("/api/instances/fired-1/replay", {"reason": "again", "params": {"a": 2, "_schedule": fired}})
    assert kept.status_code == 201, kept.content
    forged = operator.post(
        "/api/instances/fired-1/replay", {"reason": "again", "params": {"a": 2, "_schedule": {**fired, "manual": True}}}
    )
    assert error_of(forged, 400)["code"] == "reserved_param"
    assert Instance.objects.count() == 2


@pytest.mark.parametrize(
    ("query", "status", "code"),
    [
        ("until=0.5", 422, "validation_error"),  # a number is not a time (pydantic would read 1970)
        ("limit=" + "9" * 5000, 422, "validation_error"),
        ("cursor=%00", 400, "nul_character"),
    ],
)
def test_edge_values_in_api_query_strings_are_4xx(operator: ApiClient, query: str, status: int, code: str) -> None:
    response = operator.client.get(f"/api/instances?{query}", headers=operator.headers)
    assert error_of(response, status)["code"] == code


def test_a_valid_time_past_the_calendars_end_filters_as_its_end(operator: ApiClient) -> None:
    engine_services.instance_create(workflow="test-echo", id="edge-1", tenant="acme")
    response = operator.get("/api/instances", since="9999-12-31T23:59:59-01:00")
    assert response.status_code == 200 and response.json()["items"] == []
    response = operator.get("/api/instances", since="0001-01-01T00:00:00+01:00")
    assert [i["id"] for i in response.json()["items"]] == ["edge-1"]


def test_history_paging_with_an_id_beyond_bigint_is_not_a_500(operator: ApiClient) -> None:
    engine_services.instance_create(workflow="test-echo", id="hist-1", tenant="acme")
    response = operator.client.get("/api/instances/hist-1/history?after=" + "9" * 30, headers=operator.headers)
    assert response.status_code == 200, response.content[:300]
    assert response.json()["items"] == []  # nothing comes after an id no table reaches


def test_an_unauthenticated_deeply_nested_body_with_a_nul_is_a_400_not_a_500(db: Any) -> None:
    body = b'{"a": ' + b"[" * 200_000 + b'"\\u0000"' + b"]" * 200_000 + b"}"
    response = Client().post("/api/instances", data=body, content_type="application/json")
    error = error_of(response, 400)
    assert error["code"] == "too_deep"


def test_an_unknown_host_is_refused_in_the_envelope_without_echoing_it(db: Any) -> None:
    response = Client().get("/api/instances", HTTP_HOST="evil.example")
    error = error_of(response, 400)
    assert "Host header" in error["message"] and "evil" not in error["message"]


def test_too_many_form_fields_are_a_400_that_says_so(db: Any) -> None:
    fields = "&".join(f"f{i}=1" for i in range(1500))
    response = Client().post("/login/", data=fields, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400 and b"too many fields" in response.content


def test_a_server_error_under_the_api_is_still_the_envelope(settings: Any) -> None:
    from django.urls import path

    def broken(request: Any) -> Any:
        raise RuntimeError("boom")

    settings.ROOT_URLCONF = type("urls", (), {"urlpatterns": [path("api/broken", broken)]})
    response = Client(raise_request_exception=False).get("/api/broken")
    error = error_of(response, 500)
    assert error["code"] == "internal_error" and "boom" not in error["message"]


def test_a_redrive_naming_an_id_beyond_64_bits_is_a_422(operator: ApiClient) -> None:
    response = operator.post("/api/dead-letters/redrive", {"ids": [2**63], "reason": "x"})
    error = error_of(response, 422)
    assert "ids" in error["message"]


def test_a_cookie_unquoted_to_a_nul_is_refused_and_deleted(operator: ApiClient) -> None:
    # Django unquotes the octal escape \000 in a quoted cookie value to NUL.
    response = Client().get("/instances/", HTTP_COOKIE='sessionid="abcdefgh\\000ijk"')
    assert response.status_code == 400 and "cookie &#x27;sessionid&#x27;" in response.content.decode()
    assert response.cookies["sessionid"].value == "" and response.cookies["sessionid"]["max-age"] == 0
