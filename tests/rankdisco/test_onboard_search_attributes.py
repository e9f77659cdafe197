"""domain-onboard tags its instance (version 2) with the domain and its id, and the instances list
finds it; an onboarding started on version 1 replays its recorded steps without the new ones."""

from __future__ import annotations

import pytest

from ingest.engine import get
from ingest.engine.models import InstanceAttributes
from ingest.engine.services.control import instance_resume
from ingest.rankdisco import services
from ingest.rankdisco.models import Domain
from ingest.workflows.domain_onboard import DomainOnboard, domain_onboard_start
from tests.fakes.dataforseo import FakeDataForSEO
from tests.personas import listed, operator_client

# all_settled runs the fetches in threads, on connections of their own: rows must be committed.
pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

SMALL = {"backlink_limit": 5, "keyword_limit": 5, "referring_domains_limit": 5}


def attributes(instance_id: str) -> dict[str, str] | None:
    row = InstanceAttributes.objects.filter(instance_id=instance_id).first()
    return None if row is None else row.attributes


def step_names(instance_id: str) -> list[str]:
    return [s["name"] for s in get(instance_id).status()["steps"]]


def test_an_onboarding_is_tagged_with_its_domain_and_id_and_the_operator_finds_it_by_either(
    onboard_clients, drain
) -> None:
    iid, _ = domain_onboard_start("acme", "https://www.Acme.example/", **SMALL)
    other, _ = domain_onboard_start("acme", "northwind.example", **SMALL)
    drain()
    assert get(iid).status()["status"] == "complete"
    domain = Domain.objects.get(tenant="acme", name="acme.example")
    assert step_names(iid)[:3] == ["search-attributes", "ensure-domain", "search-attributes"]
    assert attributes(iid) == {"domain": "acme.example", "domain_id": str(domain.id)}

    operator = operator_client()
    assert listed(operator, "attr=domain:acme.example") == [iid]
    assert listed(operator, f"attr=domain_id:{domain.id}") == [iid]
    assert listed(operator, "workflow=domain-onboard&sort=-attr.domain") == [other, iid]


def test_a_known_domain_id_is_tagged_at_once_and_takes_no_second_step(onboard_clients, drain) -> None:
    known = services.domain_ensure(tenant="acme", name="acme.example")
    iid, _ = domain_onboard_start("acme", "acme.example", domain_id=known.id, run="again", **SMALL)
    drain()
    assert get(iid).status()["status"] == "complete"
    assert step_names(iid).count("search-attributes") == 1
    assert attributes(iid) == {"domain": "acme.example", "domain_id": str(known.id)}


def test_a_paused_onboarding_is_found_by_its_domain_while_it_waits_for_the_operator(
    onboard_clients, dataforseo: FakeDataForSEO, drain
) -> None:
    dataforseo.task_errors["broke.example"] = 40200  # the DataForSEO balance is exhausted
    iid, _ = domain_onboard_start("acme", "broke.example", **SMALL)
    drain()
    assert get(iid).status()["status"] == "paused"
    assert listed(operator_client(), "attr=domain:broke.example&status=paused") == [iid]


def test_an_onboarding_started_on_version_1_replays_its_recorded_steps_without_the_new_ones(
    onboard_clients, dataforseo: FakeDataForSEO, drain, monkeypatch
) -> None:
    dataforseo.task_errors["broke.example"] = 40200
    deployed = DomainOnboard.version
    monkeypatch.setattr(DomainOnboard, "version", 1)
    iid, _ = domain_onboard_start("acme", "broke.example", **SMALL)
    monkeypatch.setattr(DomainOnboard, "version", deployed)  # the deploy, while the instance is in flight
    drain()
    assert get(iid).status()["status"] == "paused"
    assert step_names(iid)[:2] == ["ensure-domain", "initialize"]

    del dataforseo.task_errors["broke.example"]
    instance_resume(instance_id=iid, actor="ana", reason="balance topped up")  # replayed from the top
    drain()
    status = get(iid).status()
    assert status["status"] == "complete", status["error"]
    names = [s["name"] for s in status["steps"]]
    assert "search-attributes" not in names and not any(n.startswith("keyword-intent") for n in names)
    assert attributes(iid) is None
