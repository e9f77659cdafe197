from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ingest.engine.worker.turns import run_until_idle
from ingest.pipelines.selectors import config_cache_clear
from ingest.pipelines.services import connection_upsert, keyword_list_set
from tests.fakes import FakeGong, FakeOpenAI, FakeSalesforce
from tests.fakes.fixtures import fake_anthropic, fake_gong, fake_openai, fake_salesforce  # noqa: F401

PRICER = "ingest.pipelines.pricer.price_usage"


@pytest.fixture(autouse=True)
def _pricer(settings: Any) -> None:
    """Costs are priced by the pipelines' table (the line settings.py gets)."""
    settings.RUNLEDGER_PRICER = PRICER


@pytest.fixture(autouse=True)
def _gong_limit_out_of_the_way(settings: Any) -> None:
    """Gong's 3 calls a second on the shared bucket would make every pipeline test wait on the
    wall clock; the tests of the limit set their own (a connection's `rate_limit` wins)."""
    settings.RUNLEDGER_RATE_LIMITS = {"gong": {"per_second": 10_000, "burst": 10_000}}


@pytest.fixture(autouse=True)
def _fresh_config() -> Iterator[None]:
    """Price rows, keyword lists and connections a test writes roll back with it (no delete
    signal), but a worker thread may have cached them: start and end every test with the
    process's caches empty."""
    config_cache_clear()
    yield
    config_cache_clear()


@pytest.fixture(autouse=True)
def _no_embeddings(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """WordLlama is exercised by the tests marked `embeddings`; the others skip it for speed."""
    if "with_embeddings" not in request.fixturenames:
        monkeypatch.setenv("RUNLEDGER_EMBEDDINGS", "off")


@pytest.fixture
def with_embeddings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNLEDGER_EMBEDDINGS", "wordllama")


@pytest.fixture
def drain() -> Callable[..., int]:
    def _drain(*, advance_clock: bool = True, max_turns: int = 10_000) -> int:
        return run_until_idle(advance_clock=advance_clock, max_turns=max_turns)

    return _drain


@pytest.fixture
def openai_tenant(fake_openai: FakeOpenAI) -> Iterator[str]:  # noqa: F811
    """Tenant "acme" extracting through the fake OpenAI-compatible API."""
    connection_upsert(
        tenant="acme",
        kind="llm",
        base_url=f"{fake_openai.url}/v1",
        secret="sk-fake",
        options={"provider": "openai", "model": "gpt-4o-mini", "service": "openai"},
    )
    keyword_list_set(tenant="acme", keywords=["budget", "pricing", "price", "proposal"])
    yield "acme"


@pytest.fixture
def gong_tenant(fake_gong: FakeGong, openai_tenant: str) -> str:  # noqa: F811
    connection_upsert(
        tenant=openai_tenant,
        kind="gong",
        base_url=fake_gong.url,
        key="gong-key",
        secret="gong-secret",
        webhook_key="hook-acme-123",
    )
    return openai_tenant


@pytest.fixture
def sfdc_tenant(fake_salesforce: FakeSalesforce, openai_tenant: str) -> str:  # noqa: F811
    connection_upsert(
        tenant=openai_tenant,
        kind="salesforce",
        base_url=fake_salesforce.url,
        key="sf-client",
        secret="sf-secret",
        webhook_key="hook-sf-acme",
        options={"refresh_token": "sf-refresh"},
    )
    return openai_tenant
