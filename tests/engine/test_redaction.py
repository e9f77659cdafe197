"""The one redaction every sink applies: each shape a secret takes in text, and what it keeps."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ingest.engine import redaction
from ingest.engine.redaction import MASK, redact, redact_value, remember
from ingest.engine.runtime.failures import failure_of, mark_sensitive, open_failure
from ingest.engine.runtime.records import Failure
from ingest.engine.secrets import generate_key, known

pytestmark = pytest.mark.pure


@pytest.fixture(autouse=True)
def no_literals() -> Iterator[None]:
    redaction.forget_all()
    yield
    redaction.forget_all()


@pytest.mark.parametrize(
    "name",
    [
        "apikey",
        "api_key",
        "token",
        "key",
        "secret",
        "signature",
        "password",
        "access_token",
        "client_secret",
        "x-api-key",
        "X-Signature",
        "sig",
    ],
)
def test_a_secret_named_query_parameter_loses_its_value(name: str) -> None:
    url = f"https://api.zenrows.com/v1/?{name}=s3cr3t-value&url=https%3A%2F%2Fexample.com&js_render=true"
    assert redact(url) == f"https://api.zenrows.com/v1/?{name}={MASK}&url=https%3A%2F%2Fexample.com&js_render=true"


def test_headers_and_bearer_credentials_lose_their_values() -> None:
    assert redact("Authorization: Basic Z2s6Z3M=") == f"Authorization: {MASK}"
    assert redact("{'Authorization': 'Bearer eyJhbGciOi.x.y'}") == f"{{'Authorization': '{MASK}'}}"
    assert redact("the CRM refused Bearer eyJhbGciOiJIUzI1NiJ9 for acme") == f"the CRM refused Bearer {MASK} for acme"
    assert redact("x-api-key: ak-1234567") == f"x-api-key: {MASK}"


def test_a_urls_user_and_password_are_masked_and_its_host_kept() -> None:
    assert (
        redact("export from https://svc:pa55word@db.internal:5432/x failed")
        == f"export from https://{MASK}@db.internal:5432/x failed"
    )
    assert redact("postgres://postgres@127.0.0.1:5432/rl") == f"postgres://{MASK}@127.0.0.1:5432/rl"


def test_a_webhooks_key_in_its_path_is_masked() -> None:
    assert redact("POST /hooks/gong/wh-abc_123 202") == f"POST /hooks/gong/{MASK} 202"
    assert redact("/hooks/salesforce/sf-key/cdc?x=1") == f"/hooks/salesforce/{MASK}/cdc?x=1"
    assert (
        redact("<WSGIRequest: POST '/hooks/salesforce/sf-key/outbound'>")
        == f"<WSGIRequest: POST '/hooks/salesforce/{MASK}/outbound'>"
    )


def test_json_and_repr_pairs_named_as_secrets_lose_their_values() -> None:
    assert redact('{"api_key": "ak-1", "model": "gpt-4o"}') == f'{{"api_key": "{MASK}", "model": "gpt-4o"}}'
    assert redact("{'refresh_token': 'r-2'}") == f"{{'refresh_token': '{MASK}'}}"


def test_what_is_not_secret_is_kept() -> None:
    for text in (
        "tokens_in=5 status_code=200 monkey=1",
        "/api/instances?workflow=gong-ingest",
        "a bearer token is required",
        "signature: 5f69fd93 step: scrape",
        "key_count=3",
        "ZenRows answered HTTP 422 RESP001 fetching https://example.com/pricing",
    ):
        assert redact(text) == text


def test_a_remembered_credential_is_masked_wherever_it_appears_in_free_text() -> None:
    remember("gs-0123456789", "short")
    assert redact("Gong refused gs-0123456789 today") == f"Gong refused {MASK} today"
    assert redact("too short to be masked alone: short") == "too short to be masked alone: short"
    remember("gs-0123456789-longer")  # the longer value is masked whole, not its known prefix
    assert redact("gs-0123456789-longer") == MASK


def test_an_encrypted_columns_clear_text_is_remembered_with_a_urls_path() -> None:
    known('{"url": "https://hooks.slack.example/services/T0/B0/XYZXYZXYZ", "hmac_key": "hk-abcdefgh-1234"}')
    assert (
        redact("POST failed: Max retries exceeded with url: /services/T0/B0/XYZXYZXYZ")
        == f"POST failed: Max retries exceeded with url: {MASK}"
    )
    assert redact("signed with hk-abcdefgh-1234") == f"signed with {MASK}"


def test_redaction_is_idempotent_and_reaches_inside_json_values() -> None:
    once = redact("GET /v1/?apikey=abc&url=x https://u:p@h/ Bearer abcdefghij /hooks/gong/k")
    assert redact(once) == once
    value = {"facts": {"message": "apikey=abc", "signature": "5f69"}, "n": 3, "list": ("token=t",)}
    assert redact_value(value) == {
        "facts": {"message": f"apikey={MASK}", "signature": "5f69"},
        "n": 3,
        "list": (f"token={MASK}",),
    }


def test_a_failure_is_stored_redacted_message_traceback_and_state() -> None:
    failure = Failure(
        "ZenRowsUnavailable",
        "url: /v1/?apikey=zr-1&url=x",
        traceback="Traceback ... apikey=zr-1",
        state={"args": ["url: /v1/?apikey=zr-1"]},
    )
    assert (failure.message, failure.traceback) == (
        f"url: /v1/?apikey={MASK}&url=x",
        f"Traceback ... apikey={MASK}",
    )
    assert failure.state == {"args": [f"url: /v1/?apikey={MASK}"]}


def test_a_sensitive_failure_is_sealed_whole_and_its_message_stored_as_redacted(
    settings: Any,
) -> None:
    settings.RUNLEDGER_SECRET_KEYS = [generate_key()]
    failure = failure_of(mark_sensitive(RuntimeError("vault said apikey=v-1")))
    assert failure.message == "redacted" and "v-1" not in failure.traceback
    message, _, state = open_failure(failure.message, failure.traceback)
    assert message == "vault said apikey=v-1" and state is not None
    assert state["args"] == ["vault said apikey=v-1"]
