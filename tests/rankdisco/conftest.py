"""Fixtures for RankDisco: the fake DataForSEO and ZenRows wired into `domain-onboard`'s clients,
and a small stand-in `url-classify` (the real one is its own workflow; these tests need only
its ClassificationResult)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from ingest.classify.matcher import rules_classify
from ingest.engine import NonRetryableError, Workflow
from ingest.engine import workflow as registry
from ingest.engine.worker.turns import run_until_idle
from ingest.sources.dataforseo import DataForSEOClient
from ingest.sources.http import RateLimiter
from ingest.sources.outbound import InProcess
from ingest.sources.zenrows import NativeFetcher, ZenRowsClient
from ingest.workflows.domain_onboard import OnboardClients, clients_install
from tests.fakes.dataforseo import FakeDataForSEO
from tests.fakes.zenrows import FakeZenRows

PRICER = "ingest.pipelines.pricer.price_usage"


class SiteSession(requests.Session):
    """A native fetch of https://host/path reads the fake's /site/host/path instead."""

    def __init__(self, fake: FakeZenRows) -> None:
        super().__init__()
        self.fake = fake

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        text = url.decode() if isinstance(url, bytes) else url
        if not text.startswith(self.fake.url):
            text = self.fake.site_url(text.split("/")[2], "/" + text.split("/", 3)[3] if text.count("/") > 2 else "/")
        return super().request(method, text, *args, **kwargs)


class UrlClassifyDouble(Workflow):
    """url-classify as the onboarding sees it: one ClassificationResult per URL, from the URL
    rules; below 70 it "asks the LLM" (a cost, a higher confidence). URLs holding
    `unclassifiable` fail."""

    name = "url-classify-double"

    def run(self, event: Any, step: Any) -> dict[str, Any]:
        url = str(event.payload["url"])
        if "unclassifiable" in url:
            raise NonRetryableError(f"cannot classify {url}")
        rules = step.do("rules", lambda ctx: rules_classify(url).as_dict())
        llm = rules["confidence"] < 70
        return {
            "url": url,
            "confidence": 80 if llm else rules["confidence"],
            "domain_type": rules["domain_type"],
            "page_type": rules["page_type"],
            "modifiers": rules["modifiers"],
            "classification_source": "llm" if llm else "rules",
            "stages_run": ["cache", "rules", "llm"] if llm else ["cache", "rules"],
            "round": int(llm),
            "cost_usd": 0.001 if llm else 0.0,
        }


@pytest.fixture(autouse=True)
def _pricer(settings: Any) -> None:
    settings.RUNLEDGER_PRICER = PRICER


@pytest.fixture(autouse=True)
def url_classify() -> Iterator[None]:
    """The double registered as "url-classify" for the test, whatever was registered before."""
    before = registry._registry.get("url-classify")
    registry._registry["url-classify"] = UrlClassifyDouble
    yield
    if before is None:
        registry._registry.pop("url-classify", None)
    else:
        registry._registry["url-classify"] = before


@pytest.fixture
def dataforseo() -> Iterator[FakeDataForSEO]:
    with FakeDataForSEO() as fake:
        yield fake


@pytest.fixture
def zenrows() -> Iterator[FakeZenRows]:
    with FakeZenRows() as fake:
        yield fake


@pytest.fixture
def onboard_clients(dataforseo: FakeDataForSEO, zenrows: FakeZenRows) -> Iterator[OnboardClients]:
    made = OnboardClients(
        dataforseo=DataForSEOClient(
            login="dfs-login", password="dfs-password", base_url=dataforseo.url, limiter=InProcess(RateLimiter(1000))
        ),
        native=NativeFetcher(session=SiteSession(zenrows)),
        zenrows=ZenRowsClient(api_key="zr-key", base_url=f"{zenrows.url}/v1/"),
    )
    clients_install(lambda: made)
    yield made
    clients_install(None)


@pytest.fixture
def drain() -> Callable[..., int]:
    def _drain(*, advance_clock: bool = True) -> int:
        return run_until_idle(advance_clock=advance_clock)

    return _drain
