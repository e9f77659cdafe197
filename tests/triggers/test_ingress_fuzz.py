"""Hypothesis over the signed ingress: whatever the body, headers and content type, never a
5xx, always the JSON envelope, and a refused request changes no row (tests/fuzzing.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from dashboard.observability import ingress as ingress_counting
from ingest.triggers import signing
from ingest.triggers.models import Route
from tests.fuzzing import (
    answered,
    content_types,
    fuzz,
    hostile_body,
    json_values,
    raw_json,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db]

header_text = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60)
timestamps = (
    st.integers(min_value=0, max_value=10**12).map(str)
    | header_text
    | st.integers(min_value=13, max_value=600).map(lambda n: "9" * n)
)


@pytest.fixture(autouse=True)
def _short_waits(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sync waits poll the ledger for the output; no worker runs here, so keep them short. Every
    request flushes the ingress counts, as requests do once a long-running process's 5 s are up
    (a hostile route name once broke that flush, and only long runs saw it)."""
    settings.RUNLEDGER_INGRESS_MAX_WAIT_SECONDS = 0.01
    monkeypatch.setattr(ingress_counting, "FLUSH_SECONDS", 0.0)


def post(client: Client, path: str, body: bytes, content_type: str, headers: dict[str, str]) -> Any:
    return answered("ingress", path, lambda: client.post(path, data=body, content_type=content_type, headers=headers))


def signed(creds: dict[str, str], body: bytes, *, stamp: str | None = None, key: str | None = None) -> dict[str, str]:
    stamp = stamp or str(int(timezone.now().timestamp()))
    headers = {
        "Authorization": f"Bearer {creds['token']}",
        "X-Runledger-Timestamp": stamp,
        "X-Runledger-Signature": signing.sign(secret=creds["secret"], timestamp=stamp, body=body),
    }
    if key is not None:
        headers["Idempotency-Key"] = key
    return headers


@fuzz(500)
@given(
    body=hostile_body,
    content_type=content_types,
    key=st.none() | header_text,
    wait=st.none() | st.sampled_from(["0", "30s", "1500ms", "-1", "9" * 400, "1e999", "%00", "2m"]),
)
def test_correctly_signed_hostile_bodies_are_refused_cleanly(
    client: Client,
    route: Route,
    acme_creds: dict[str, str],
    body: bytes,
    content_type: str,
    key: str | None,
    wait: str | None,
) -> None:
    path = "/api/routes/orders" + (f"?wait={wait}" if wait is not None else "")
    response = post(client, path, body, content_type, signed(acme_creds, body, key=key))
    if response.status_code in (200, 202):
        assert response.json()["instance_id"].startswith("orders-")


@fuzz(250)
@given(params=json_values, replay=st.booleans())
def test_json_objects_start_once_and_replays_start_nothing(
    client: Client, route: Route, acme_creds: dict[str, str], params: Any, replay: bool
) -> None:
    body = raw_json({"p": params})
    headers = signed(acme_creds, body)
    first = post(client, "/api/routes/orders", body, "application/json", headers)
    if replay and first.status_code == 202:
        again = post(client, "/api/routes/orders", body, "application/json", headers)
        assert again.status_code == 409 and again.json()["error"]["code"] == "replayed_request"


@fuzz(250)
@given(
    timestamp=timestamps,
    signature=header_text,
    token=header_text,
    route_name=st.sampled_from(["orders", "nope", "ord%20ers", "or%00ders", "x" * 300]),
)
def test_garbage_auth_headers_and_routes_are_4xx_not_500(
    client: Client, route: Route, timestamp: str, signature: str, token: str, route_name: str
) -> None:
    response = post(
        client,
        f"/api/routes/{route_name}",
        b"{}",
        "application/json",
        {"Authorization": f"Bearer {token}", "X-Runledger-Timestamp": timestamp, "X-Runledger-Signature": signature},
    )
    assert response.status_code in (400, 401, 404)
