"""Which extractor and embedder a step uses, and what each call spent.

The tenant's LLM connection (or the RUNLEDGER_LLM_* environment) picks the extractor: the
offline rule extractor by default, an OpenAI-compatible or Anthropic client, or the "demo"
provider (rules billed as a model would be).
Clients are built once per configuration and process and shared by steps in every thread.

Spend is read off the wire: the client reports the `usage` of every answer the provider sent
(`on_usage`), including answers it then rejects (blank content, malformed JSON), because the
provider bills those too. A step records one `api_costs` row per such answer. (A `requests`
response hook did this before, parsing every answer's JSON a second time.)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from ingest.extraction.prompt import SYSTEM_PROMPT, LLMFactExtractor
from ingest.extraction.rules import RuleExtractor
from ingest.pipelines.pricer import estimate_usage_cost
from ingest.pipelines.selectors import LLMConfig
from ingest.sources.http import new_session
from ingest.sources.llm import AnthropicClient, LLMServerError, OpenAIChatClient
from ingest.sources.llm.common import LLMResult
from ingest.sources.usage import Usage

MAX_OUTPUT_TOKENS = 2048
_meter = threading.local()


class Extractor(Protocol):
    service: str
    model: str
    metered: bool  # True when spend is read off HTTP answers (see module docstring)

    def extract(self, text: str, *, subject: str, source: str, key: str, attempt: int) -> LLMResult: ...


def token_estimate(text: str) -> int:
    """Roughly 4 characters a token: enough for a reservation, settled with the real usage."""
    return max(1, -(-len(text) // 4))


@contextmanager
def usage_meter() -> Iterator[list[Usage]]:
    """Collect the usage of every provider answer received in this thread inside the block."""
    seen: list[Usage] = []
    stack: list[list[Usage]] = getattr(_meter, "stack", [])
    _meter.stack = [*stack, seen]
    try:
        yield seen
    finally:
        _meter.stack = stack


def _metered(usage: Usage) -> None:
    """`on_usage` of the clients: count an answer's usage in this thread's innermost meter."""
    stack = getattr(_meter, "stack", None)
    if stack:
        stack[-1].append(usage)


@dataclass
class RulesExtractor:
    """The offline default: no key, no network, zero cost (still recorded, as service "rules")."""

    service: str = "rules"
    model: str = "rules-v1"
    metered: bool = False

    def extract(self, text: str, *, subject: str, source: str, key: str, attempt: int) -> LLMResult:
        return RuleExtractor().extract(text, subject=subject)


class DemoExtractor:
    """The "demo" provider: the rule extractor billed as the configured model would be (prompt
    and answer tokens estimated, priced like real usage), failing the first attempts of the
    keys in `options["flaky"]` with a retryable 503 so a tenant without a key shows retries."""

    metered = False

    def __init__(self, config: LLMConfig) -> None:
        self.service = config.service or "deepseek"
        self.model = config.model or "deepseek-chat"
        self.flaky = frozenset(str(k) for k in config.options.get("flaky", ()))
        self.fail_attempts = int(config.options.get("fail_attempts", 1))

    def extract(self, text: str, *, subject: str, source: str, key: str, attempt: int) -> LLMResult:
        if key in self.flaky and attempt <= self.fail_attempts:
            raise LLMServerError(
                f"{self.service} answered HTTP 503 to model {self.model!r} (demo: attempt {attempt} of "
                f"{key} fails on purpose) — retry later",
                retryable=True,
                status=503,
            )
        result = RuleExtractor().extract(text, subject=subject)
        usage = Usage(
            service=self.service,
            model=self.model,
            input_tokens=prompt_tokens(text),
            output_tokens=token_estimate(result.raw_text),
        )
        return LLMResult(data=result.data, usage=usage, model=self.model, raw_text=result.raw_text)


class ClientExtractor:
    """An LLM client behind the extraction prompt; spend metered off its HTTP answers."""

    metered = True

    def __init__(self, config: LLMConfig) -> None:
        self.model = config.model
        if config.provider == "anthropic":
            self.service = config.service or "anthropic"
            self.model = config.model or "claude-3-5-haiku-latest"
            client: Any = AnthropicClient(
                api_key=config.api_key,
                model=self.model,
                base_url=config.base_url or "https://api.anthropic.com",
                session=new_session(),
                on_usage=_metered,
            )
        else:
            self.service = config.service or "openai"
            self.model = config.model or "gpt-4o-mini"
            client = OpenAIChatClient(
                base_url=config.base_url or "https://api.openai.com/v1",
                api_key=config.api_key or None,
                model=self.model,
                service=self.service,
                session=new_session(),
                on_usage=_metered,
            )
        self._extractor = LLMFactExtractor(client, max_tokens=MAX_OUTPUT_TOKENS)

    def extract(self, text: str, *, subject: str, source: str, key: str, attempt: int) -> LLMResult:
        return self._extractor.extract(text, subject=subject, source=source)


_cache: dict[tuple[Any, ...], Extractor] = {}
_cache_lock = threading.Lock()


def extractor_for(config: LLMConfig) -> Extractor:
    """The extractor for a configuration, built once per process."""
    ident = (
        config.provider,
        config.base_url,
        config.api_key,
        config.model,
        config.service,
        repr(sorted(config.options.items())),
    )
    with _cache_lock:
        if ident not in _cache:
            _cache[ident] = _build(config)
        return _cache[ident]


def _build(config: LLMConfig) -> Extractor:
    if config.provider in ("", "rules"):
        return RulesExtractor()
    if config.provider == "demo":
        return DemoExtractor(config)
    if config.provider in ("openai", "anthropic"):
        return ClientExtractor(config)
    raise ValueError(
        f"LLM provider {config.provider!r} is unknown; use rules, openai (any OpenAI-compatible "
        "API), anthropic or demo in the tenant's LLM connection or RUNLEDGER_LLM_PROVIDER"
    )


def prompt_tokens(text: str) -> int:
    return token_estimate(SYSTEM_PROMPT) + token_estimate(text) + 16


def reservation(extractor: Extractor, text: str, *, at: Any) -> Decimal:
    """The most one extraction call may cost: the whole prompt uncached, the longest answer."""
    if not extractor.metered and extractor.service == "rules":
        return Decimal("0")
    return estimate_usage_cost(
        extractor.service, extractor.model, input_tokens=prompt_tokens(text), output_tokens=MAX_OUTPUT_TOKENS, at=at
    )


# ---- embeddings --------------------------------------------------------------------------------


_embedder: Any = None
_embedder_lock = threading.Lock()


def embedder() -> Any:
    """WordLlama (offline, 256 dimensions), loaded once per process."""
    global _embedder
    with _embedder_lock:
        if _embedder is None:
            from ingest.sources.embeddings import WordLlamaEmbedder

            _embedder = WordLlamaEmbedder()
        return _embedder
