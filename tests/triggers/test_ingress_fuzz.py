"""Hypothesis over the ingress: whatever the body and headers, never a 500, always the envelope."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.triggers.models import Route
from tests.triggers.support import signed_post

pytestmark = [pytest.mark.db, pytest.mark.django_db]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children,
                                                                      max_size=4),
    max_leaves=20,
)
header_text = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=st.binary(max_size=300) | json_values.map(lambda v: __import__("json").dumps(v).encode()),
       key=st.none() | header_text, wait=st.none() | header_text, sign=st.booleans(),
       route_name=st.sampled_from(["orders", "nope", "ord%20ers"]))
def test_the_ingress_never_answers_500(client: Client, route: Route, acme_creds: dict[str, str],
                                       body: bytes, key: str | None, wait: str | None,
                                       sign: bool, route_name: str) -> None:
    secret = acme_creds["secret"] if sign else "wrong"
    response: Any = signed_post(client, route_name, body, token=acme_creds["token"], secret=secret,
                                key=key, wait=None if wait is None else wait.replace(" ", "")[:10]
                                or None)
    assert response.status_code < 500
    if response.status_code >= 400:
        assert set(response.json()["error"]) >= {"code", "message"}


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(timestamp=header_text, signature=header_text, token=header_text)
def test_garbage_auth_headers_are_401_not_500(client: Client, route: Route, timestamp: str,
                                              signature: str, token: str) -> None:
    response = client.post("/api/routes/orders", data=b"{}", content_type="application/json",
                           headers={"Authorization": f"Bearer {token}",
                                    "X-Runledger-Timestamp": timestamp,
                                    "X-Runledger-Signature": signature})
    assert response.status_code == 401
