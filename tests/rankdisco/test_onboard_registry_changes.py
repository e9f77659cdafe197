"""domain-onboard decides once, inside a step, whether a URL classifier is deployed: a deploy
while a run is in flight does not change that run's path."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.engine import get
from ingest.engine import workflow as registry
from ingest.engine.models import Instance, Step
from ingest.rankdisco.models import Domain
from ingest.workflows.domain_onboard import domain_onboard_start
from tests.fakes.dataforseo import ROUTE_SPAM, FakeDataForSEO
from tests.fakes.server import Planned

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

SMALL = {"backlink_limit": 10, "keyword_limit": 10, "referring_domains_limit": 10}


def _started_and_backing_off(dataforseo: FakeDataForSEO, drain: Any) -> str:
    """An onboarding past track-all-queued, waiting out a retry of the spam scores."""
    dataforseo.plan(ROUTE_SPAM, Planned(500, {"status_code": 50000, "status_message": "Internal error."}))
    iid, _ = domain_onboard_start("acme", "acme.example", **SMALL)
    drain(advance_clock=False)
    assert get(iid).status()["status"] == "waiting"
    return iid


def _tracked(iid: str) -> Step:
    return Step.objects.get(instance_id=iid, name="track-all-queued")


def test_a_classifier_deployed_while_a_run_is_in_flight_does_not_change_its_path(
    onboard_clients, dataforseo: FakeDataForSEO, drain, monkeypatch
) -> None:
    with monkeypatch.context() as before_the_deploy:
        before_the_deploy.delitem(registry._registry, "url-classify")
        iid = _started_and_backing_off(dataforseo, drain)
    assert "url-classify" in registry.workflow_names()  # the deploy: a classifier is registered now

    drain()
    status = get(iid).status()
    assert status["status"] == "complete", status["error"]
    names = [s["name"] for s in status["steps"]]
    assert "fetch-ranking-url-spam-scores" in names and "finalize" in names
    assert "queue-domain-classification" not in names  # the path it recorded: nothing queued
    assert not Instance.objects.filter(parent_id=iid).exists()
    assert Domain.objects.get(tenant="acme", name="acme.example").urls_queued_for_classification == 0


def test_a_run_recorded_before_the_decision_was_kept_reads_the_registry(
    onboard_clients, dataforseo: FakeDataForSEO, drain
) -> None:
    iid = _started_and_backing_off(dataforseo, drain)
    tracked = _tracked(iid)
    assert tracked.result["classify"] is True
    Step.objects.filter(id=tracked.id).update(result={k: v for k, v in tracked.result.items() if k != "classify"})
    drain()
    status = get(iid).status()
    assert status["status"] == "complete", status["error"]
    assert "queue-domain-classification" in [s["name"] for s in status["steps"]]
    assert Instance.objects.filter(parent_id=iid, workflow="url-classify").exists()
