"""Which outside systems url-classify talks to, configured from the tenant's connections (LLM,
ZenRows) and else from the environment, built once per configuration and process.

    RUNLEDGER_EMBEDDINGS            wordllama (default, offline) | openai (any OpenAI-compatible
                                    /embeddings) | off (no similarity stage)
    RUNLEDGER_EMBEDDINGS_BASE_URL / _API_KEY / _MODEL / _SERVICE   for `openai`
    the tenant's ZenRows connection, else
    RUNLEDGER_ZENROWS_API_KEY       ZenRows' key; without either the cascade stops after the native fetch
    RUNLEDGER_ZENROWS_BASE_URL      default https://api.zenrows.com/v1/
    RUNLEDGER_FETCH_PROXY           an HTTP proxy for the native fetch (egress proxies, the demo)
    the tenant's LLM connection     stage 4: provider openai or anthropic (the offline `rules`
                                    and `demo` providers have no model to ask: stage 4 is skipped)

The LLM clients report the usage of every answer they receive (`on_usage`), including answers
they then reject, so a step records what each answer cost.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ingest.pipelines.selectors import llm_config_get, zenrows_config_get
from ingest.sources.embeddings import Embedder, OpenAIEmbeddings, WordLlamaEmbedder
from ingest.sources.http import new_session
from ingest.sources.llm import AnthropicClient, LLMClient, OpenAIChatClient
from ingest.sources.usage import Usage
from ingest.sources.zenrows import NativeFetcher, ZenRowsClient

ENV: Mapping[str, str] = os.environ
_lock = threading.Lock()
_built: dict[tuple[Any, ...], Any] = {}
_meter = threading.local()


def _once(key: tuple[Any, ...], build: Any) -> Any:
    with _lock:
        if key not in _built:
            _built[key] = build()
        return _built[key]


@dataclass(frozen=True)
class EmbedderChoice:
    embedder: Embedder
    service: str
    model: str


def embedder_choice() -> EmbedderChoice | None:
    """The configured embedder, or None when embeddings are off."""
    kind = ENV.get("RUNLEDGER_EMBEDDINGS", "wordllama")
    if kind == "off":
        return None
    if kind == "openai":
        base = ENV.get("RUNLEDGER_EMBEDDINGS_BASE_URL", "https://api.openai.com/v1")
        key = ENV.get("RUNLEDGER_EMBEDDINGS_API_KEY", "") or None
        model = ENV.get("RUNLEDGER_EMBEDDINGS_MODEL", "text-embedding-3-small")
        service = ENV.get("RUNLEDGER_EMBEDDINGS_SERVICE", "openai")
        client = _once(
            ("emb", base, key, model, service),
            lambda: OpenAIEmbeddings(base_url=base, api_key=key, model=model, service=service, session=new_session()),
        )
        return EmbedderChoice(client, service, model)
    if kind != "wordllama":
        raise ValueError(f"RUNLEDGER_EMBEDDINGS={kind!r} is unknown; use wordllama, openai or off")
    client = _once(("emb", "wordllama"), WordLlamaEmbedder)
    return EmbedderChoice(client, client.service, client.model)


def zenrows_client(tenant: str = "") -> ZenRowsClient | None:
    """The tenant's ZenRows connection, else the environment's key; None when neither is set."""
    config = zenrows_config_get(tenant=tenant)
    if not config.api_key:
        return None
    client: ZenRowsClient = _once(
        ("zenrows", config.api_key, config.base_url),
        lambda: ZenRowsClient(api_key=config.api_key, base_url=config.base_url),
    )
    return client


def native_fetcher() -> NativeFetcher:
    proxy = ENV.get("RUNLEDGER_FETCH_PROXY", "")

    def build() -> NativeFetcher:
        session = new_session()
        if proxy:
            session.proxies = {"http": proxy, "https": proxy}
            session.trust_env = False
        return NativeFetcher(session=session)

    fetcher: NativeFetcher = _once(("native", proxy), build)
    return fetcher


@dataclass(frozen=True)
class LLMChoice:
    client: LLMClient
    service: str
    model: str


def llm_choice(tenant: str) -> LLMChoice | None:
    """The tenant's LLM for stage 4, or None when it has only the offline extractors."""
    config = llm_config_get(tenant=tenant)
    if config.provider == "anthropic":
        model = config.model or "claude-3-5-haiku-latest"
        base = config.base_url or "https://api.anthropic.com"
        client: LLMClient = _once(
            ("anthropic", base, config.api_key, model),
            lambda: AnthropicClient(
                api_key=config.api_key, model=model, base_url=base, session=new_session(), on_usage=_metered
            ),
        )
        return LLMChoice(client, config.service or "anthropic", model)
    if config.provider == "openai":
        model = config.model or "gpt-4o-mini"
        service = config.service or "openai"
        base = config.base_url or "https://api.openai.com/v1"
        client = _once(
            ("openai", base, config.api_key, model, service),
            lambda: OpenAIChatClient(
                base_url=base,
                api_key=config.api_key or None,
                model=model,
                service=service,
                session=new_session(),
                on_usage=_metered,
            ),
        )
        return LLMChoice(client, service, model)
    return None


@contextmanager
def usage_meter() -> Iterator[list[Usage]]:
    """Collect the usage of every LLM answer received in this thread inside the block."""
    seen: list[Usage] = []
    previous = getattr(_meter, "seen", None)
    _meter.seen = seen
    try:
        yield seen
    finally:
        _meter.seen = previous


def _metered(usage: Usage) -> None:
    seen = getattr(_meter, "seen", None)
    if seen is not None:
        seen.append(usage)


def clients_clear() -> None:
    """Forget the built clients (tests change the configuration between cases)."""
    with _lock:
        _built.clear()
