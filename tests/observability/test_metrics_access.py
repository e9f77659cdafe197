"""Who may scrape /metrics: the token, the allow-list, and everyone else refused."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from dashboard.observability import guard

pytestmark = pytest.mark.db


@override_settings(RUNLEDGER_METRICS_TOKEN="", RUNLEDGER_METRICS_ALLOW=["127.0.0.1", "10.1.0.0/16"])
def test_an_address_outside_the_allow_list_is_refused_with_403_when_no_token_is_set(db: object) -> None:
    client = Client()
    refused = client.get("/metrics", REMOTE_ADDR="192.0.2.7")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"
    assert "192.0.2.7" in refused.json()["error"]["message"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.200.3").status_code == 200


@override_settings(RUNLEDGER_METRICS_TOKEN="s3cret-scrape", RUNLEDGER_METRICS_ALLOW=["127.0.0.1"])
def test_a_missing_or_wrong_token_is_refused_with_401_and_the_right_one_is_let_in(db: object) -> None:
    client = Client()
    missing = client.get("/metrics", REMOTE_ADDR="192.0.2.7")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"] == "Bearer"
    wrong = client.get("/metrics", REMOTE_ADDR="192.0.2.7", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "invalid_token"
    # A wrong token is refused even from an allowed address: a misconfigured scraper shows up.
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", headers={"Authorization": "Bearer nope"}).status_code == 401
    ok = client.get("/metrics", REMOTE_ADDR="192.0.2.7", headers={"Authorization": "Bearer s3cret-scrape"})
    assert ok.status_code == 200
    assert b"runledger_instances_started_total" in ok.content or b"runledger_instances_started" in ok.content


@pytest.mark.pure
def test_a_malformed_allow_list_entry_is_named() -> None:
    with pytest.raises(ValueError, match="'10.0.0.300'"):
        guard.networks(["127.0.0.1", "10.0.0.300"])


@pytest.mark.pure
def test_ipv6_loopback_is_allowed_by_the_default_list() -> None:
    allow = guard.networks(["127.0.0.1", "::1"])
    assert guard.check(authorization="", address="::1", token="", allow=allow) is None
    refusal = guard.check(authorization="Basic abc", address="::2", token="", allow=allow)
    assert refusal is not None and refusal.status == 403
