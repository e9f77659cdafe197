"""The demo's domains onboard offline through the real clients, one of them with a failed branch."""

from __future__ import annotations

import pytest

from ingest.demo.rankdisco import DEMO_LIMIT, FAILING_KEYWORDS, demo_onboard
from ingest.engine.models import ApiCost, Budget, Instance
from ingest.rankdisco.models import Domain
from ingest.workflows.domain_onboard import clients_install
from tests.personas import listed, operator_client

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def test_the_demo_onboards_its_domains_with_one_failed_branch_and_only_once(drain) -> None:
    try:
        assert demo_onboard() == (4, 0)
        drain()
        statuses = dict(Instance.objects.filter(workflow="domain-onboard").values_list("params__domain", "status"))
        assert statuses == {
            "acme-logistics.example": "complete",
            "northwind.example": "complete",
            "globex.example": "complete",
            FAILING_KEYWORDS: "completed_with_errors",
        }
        domain = Domain.objects.get(name="globex.example")
        assert domain.backlinks_count == DEMO_LIMIT and domain.brand_properties_count == 3
        assert Budget.objects.filter(scope="service", key="dataforseo", period="day", policy="approval").exists()
        assert ApiCost.objects.filter(service="dataforseo", metadata__domain="globex.example").count() == 4
        # the README's operator finds an onboarding by its domain
        acme = Instance.objects.get(workflow="domain-onboard", params__domain="acme-logistics.example")
        assert listed(operator_client(), "attr=domain:acme-logistics.example") == [acme.id]
        assert demo_onboard() == (0, 4)
    finally:
        clients_install(None)
