from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ingest.engine.worker.turns import run_until_idle
from ingest.pipelines.selectors import config_cache_clear
from ingest.pipelines.services import connection_upsert
from tests.fakes.classify import FakeClassifyLLM, FakeWeb

PROTECTED = "guarded.example"  # natives get a challenge page, ZenRows basic gets through
FORTRESS = "fortress.example"  # only ZenRows premium gets through
GONE = "gone.example"


@pytest.fixture
def fake_web() -> Iterator[FakeWeb]:
    with FakeWeb(protected=[PROTECTED], premium_only=[FORTRESS], gone=[GONE]) as server:
        yield server


@pytest.fixture
def fake_llm() -> Iterator[FakeClassifyLLM]:
    with FakeClassifyLLM() as server:
        yield server


@pytest.fixture
def classify_env(monkeypatch: pytest.MonkeyPatch, settings: Any, fake_web: FakeWeb, fake_llm: FakeClassifyLLM) -> str:
    """Tenant "acme": native fetches through the fake web, ZenRows and the LLM on the fakes,
    WordLlama embeddings. Returns the tenant."""
    from ingest.classify.neighbours import index_cache_clear
    from ingest.workflows.url_classify.clients import clients_clear

    settings.RUNLEDGER_PRICER = "ingest.pipelines.pricer.price_usage"
    monkeypatch.setenv("RUNLEDGER_FETCH_PROXY", fake_web.url)
    monkeypatch.setenv("RUNLEDGER_ZENROWS_API_KEY", "zr-key")
    monkeypatch.setenv("RUNLEDGER_ZENROWS_BASE_URL", f"{fake_web.url}/v1/")
    monkeypatch.setenv("RUNLEDGER_EMBEDDINGS", "wordllama")
    config_cache_clear()
    clients_clear()
    index_cache_clear()
    connection_upsert(
        tenant="acme",
        kind="llm",
        base_url=f"{fake_llm.url}/v1",
        secret="sk-fake",
        options={"provider": "openai", "model": "gpt-4o-mini", "service": "openai"},
    )
    yield "acme"  # type: ignore[misc]
    config_cache_clear()
    clients_clear()
    index_cache_clear()


@pytest.fixture
def drain() -> Callable[..., int]:
    def _drain(*, advance_clock: bool = True, max_turns: int = 10_000) -> int:
        return run_until_idle(advance_clock=advance_clock, max_turns=max_turns)

    return _drain
