"""GET /api/metrics (seed 001 getMetrics): per workflow over a window, within the caller's tenants."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.models import Role
from dashboard.observability.summary import InvalidWindow, parse_window, percentile
from ingest.engine import create
from ingest.engine.models import Instance
from ingest.engine.worker.turns import run_until_idle
from tests.api.conftest import ApiClient, persona


@pytest.fixture
def operator(db: Any) -> ApiClient:
    return persona("op", [("acme", Role.OPERATOR)])


@pytest.fixture
def viewer(db: Any) -> ApiClient:
    return persona("view", [("acme", Role.VIEWER)])


@pytest.fixture
def stranger(db: Any) -> ApiClient:
    return persona("strange", [("initech", Role.OPERATOR)])


@pytest.fixture
def ledger(db: Any) -> None:
    for i in range(3):
        create("obs-flaky", id=f"f-{i}", tenant="acme")
    create("obs-broken", id="b-1", tenant="acme")
    create("obs-flaky", id="other-tenant", tenant="initech")
    run_until_idle()
    now = timezone.now()
    # Known durations: 10 s, 20 s, 30 s from creation to finish.
    for i, seconds in enumerate((10, 20, 30)):
        Instance.objects.filter(id=f"f-{i}").update(
            created_at=now - timedelta(minutes=5), ended_at=now - timedelta(minutes=5) + timedelta(seconds=seconds)
        )
    # Created two days ago: outside a 24h window.
    create("obs-flaky", id="old-1", tenant="acme")
    Instance.objects.filter(id="old-1").update(created_at=now - timedelta(days=2))


def _by_workflow(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {w["workflow"]: w for w in body["workflows"]}


def test_it_gives_counts_rates_percentiles_and_cost_per_workflow(ledger: None, viewer: ApiClient) -> None:
    response = viewer.get("/api/metrics", window="24h")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["window"] == "24h" and body["tenants"] == ["acme"]
    flaky, broken = _by_workflow(body)["obs-flaky"], _by_workflow(body)["obs-broken"]
    assert flaky["counts"] == {"complete": 3}
    assert flaky["finished_per_minute"] == round(3 / (24 * 60), 6)
    assert flaky["error_rate"] == 0
    assert flaky["p50_seconds"] == 20 and flaky["p95_seconds"] == 30
    assert float(flaky["cost_usd"]) == 0.75 and flaky["cost_calls"] == 3
    assert broken["counts"] == {"errored": 1} and broken["error_rate"] == 1


def test_it_narrows_to_one_workflow_and_another_tenant_sees_only_its_own(
    ledger: None, viewer: ApiClient, stranger: ApiClient
) -> None:
    only = viewer.get("/api/metrics", workflow="obs-broken", window="1h").json()
    assert [w["workflow"] for w in only["workflows"]] == ["obs-broken"]
    theirs = _by_workflow(stranger.get("/api/metrics", window="1h").json())
    assert list(theirs) == ["obs-flaky"] and theirs["obs-flaky"]["counts"] == {"complete": 1}


@pytest.mark.parametrize("window", ["yesterday", "0m", "91d", "1w", "-1h", "1h; drop"])
def test_a_bad_window_is_a_400_json_error_naming_it(db: Any, viewer: ApiClient, window: str) -> None:
    response = viewer.get("/api/metrics", window=window)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_window"
    assert "window" in error["message"]


def test_an_unknown_workflow_is_a_404_and_no_token_a_401(db: Any, viewer: ApiClient) -> None:
    missing = viewer.get("/api/metrics", workflow="no-such-flow")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "workflow_not_found"
    anonymous = Client().get("/api/metrics")
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "not_authenticated"


@pytest.mark.pure
def test_windows_and_percentiles_parse_as_documented() -> None:
    assert parse_window("15m") == timedelta(minutes=15)
    assert parse_window("36h") == timedelta(hours=36)
    with pytest.raises(InvalidWindow):
        parse_window("90d1")
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.95) == 4.0
    assert percentile([], 0.5) is None
