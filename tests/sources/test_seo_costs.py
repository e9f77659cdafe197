"""A step records a paid call's api_costs row in one line, with the provider's own figure."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from ingest.engine import Workflow, create_batch
from ingest.engine.models import ApiCost, Budget
from ingest.engine.runtime.context import StepContext
from ingest.engine.services.budgets import budget_upsert
from ingest.sources.dataforseo import DataForSEOClient
from ingest.sources.http import RateLimiter
from ingest.sources.outbound import InProcess
from ingest.sources.seo_services import DATAFORSEO_BACKLINKS
from ingest.sources.zenrows import ZenRowsClient
from tests.fakes.dataforseo import FakeDataForSEO
from tests.fakes.zenrows import FakeZenRows

pytestmark = pytest.mark.db


class SeoCosts(Workflow):
    name = "t-seo-costs"

    def run(self, event: Any, step: Any) -> None:
        return None


@pytest.fixture
def fakes() -> Iterator[tuple[FakeDataForSEO, FakeZenRows]]:
    with FakeDataForSEO() as dfs, FakeZenRows() as zr:
        yield dfs, zr


def context(instance_id: str) -> StepContext:
    return StepContext(name="fetch-backlinks", count=1, attempt=1, config={}, idempotency_key="k",
                       instance_id=instance_id, workflow="t-seo-costs", tenant="acme",
                       step_label="fetch-backlinks")  # fmt: skip


@pytest.mark.django_db
def test_paid_calls_land_in_api_costs_as_reported_and_settle_the_provider_budget(
    fakes: tuple[FakeDataForSEO, FakeZenRows],
) -> None:
    dfs, zr = fakes
    create_batch("t-seo-costs", [{"id": "seo-1", "tenant": "acme"}])
    budget_upsert(scope="service", key="dataforseo", period="day", limit="10", actor="ana")
    client = DataForSEOClient(login="dfs-login", password="dfs-password", base_url=dfs.url,
                              limiter=InProcess(RateLimiter(100)))  # fmt: skip
    ctx = context("seo-1")

    ctx.check_budget(DATAFORSEO_BACKLINKS.service, DATAFORSEO_BACKLINKS.estimate(items=100))
    call = client.backlinks("acme.example", limit=100)
    ctx.track_cost(**call.track_cost_kwargs())
    page = ZenRowsClient(api_key="zr-key", base_url=f"{zr.url}/v1/").fetch("https://acme.example/")
    ctx.track_cost(**page.track_cost_kwargs())

    rows = list(ApiCost.objects.order_by("id").values("service", "model", "cost", "items", "metadata"))
    assert [(r["service"], r["model"], r["cost"], r["items"]) for r in rows] == [
        ("dataforseo", "backlinks/backlinks/live", Decimal("0.023"), 100),
        ("zenrows", "basic", Decimal("0.001"), 1),
    ]
    assert rows[0]["metadata"]["cost_service"] == "DATAFORSEO_BACKLINKS"
    assert rows[0]["metadata"]["items_count"] == 100 and rows[0]["metadata"]["task_id"]
    assert rows[1]["metadata"]["cost_service"] == "ZENROWS_BASIC"
    assert sum(r["cost"] for r in rows) == dfs.billed + zr.billed
    budget = Budget.objects.get(key="dataforseo")
    assert (budget.spent, budget.reserved) == (Decimal("0.023"), Decimal("0"))
