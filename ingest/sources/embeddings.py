"""Text embeddings: WordLlama offline (the default) or an OpenAI-compatible `/embeddings` API."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Unpack

from ingest.sources.errors import SourceError
from ingest.sources.llm.common import JsonApi, LLMError, TransportOptions, bearer_headers
from ingest.sources.usage import Usage


class EmbeddingError(SourceError):
    """The embedding provider returned an unexpected answer."""


@dataclass(frozen=True)
class EmbeddingResult:
    vectors: list[list[float]]
    model: str
    usage: Usage = field(default_factory=Usage)


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> EmbeddingResult: ...


def cosine_similarity(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine of the angle between two vectors; 0.0 when either is all zeros."""
    if len(a) != len(b):
        raise ValueError(f"cannot compare vectors of {len(a)} and {len(b)} dimensions")
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 0.0 if norm == 0 else dot / norm


_MODELS: dict[int, Any] = {}
_MODELS_LOCK = threading.Lock()


def _wordllama(dim: int) -> Any:
    """The WordLlama model, loaded once per process from the weights inside the wheel."""
    with _MODELS_LOCK:
        if dim not in _MODELS:
            try:
                import wordllama
                from wordllama import WordLlama
            except ImportError as error:  # pragma: no cover - installed with the project
                raise EmbeddingError("the wordllama package is not installed; pip install wordllama") from error
            folder = os.path.dirname(wordllama.__file__)
            try:
                _MODELS[dim] = WordLlama.load(dim=dim, disable_download=True, cache_dir=folder)
            except (FileNotFoundError, ValueError) as error:
                raise EmbeddingError(
                    f"WordLlama weights for dim={dim} are not in {folder} ({error}); "
                    "use dim=256, which ships with the wheel"
                ) from error
        return _MODELS[dim]


class WordLlamaEmbedder:
    """Offline embeddings: no key, no network, normalised vectors (256 dimensions)."""

    service = "wordllama"

    def __init__(self, *, dim: int = 256) -> None:
        self.dim = dim
        self.model = f"wordllama-l2-supercat-{dim}"

    def embed(self, texts: Sequence[str]) -> EmbeddingResult:
        if not texts:
            return EmbeddingResult(vectors=[], model=self.model, usage=Usage(self.service, self.model))
        array = _wordllama(self.dim).embed(list(texts), norm=True)
        return EmbeddingResult(
            vectors=[[float(x) for x in row] for row in array],
            model=self.model,
            usage=Usage(service=self.service, model=self.model, items=len(texts)),
        )


class OpenAIEmbeddings:
    """`POST {base_url}/embeddings` (OpenAI, vLLM, Ollama…), vectors in input order."""

    def __init__(
        self,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        model: str = "text-embedding-3-small",
        service: str = "openai",
        dimensions: int | None = None,
        **transport: Unpack[TransportOptions],
    ) -> None:
        self.model = model
        self.service = service
        self.dimensions = dimensions
        self._api_key = api_key
        self._api = JsonApi(provider=service, base_url=base_url, idempotency_header="Idempotency-Key", **transport)

    def embed(self, texts: Sequence[str]) -> EmbeddingResult:
        """Raises LLMError subclasses (they carry retryable and retry_after)."""
        body: dict[str, Any] = {
            "model": self.model,
            "input": list(texts),
            "encoding_format": "float",
        }
        if self.dimensions:
            body["dimensions"] = self.dimensions
        payload = self._api.post("/embeddings", body=body, headers=bearer_headers(self._api_key), model=self.model)
        rows = sorted(payload.get("data") or [], key=lambda row: int(row.get("index", 0)))
        if len(rows) != len(texts):
            raise LLMError(
                f"{self.service} returned {len(rows)} embeddings for {len(texts)} inputs; retry",
                retryable=True,
            )
        model = str(payload.get("model") or self.model)
        tokens = int((payload.get("usage") or {}).get("prompt_tokens") or 0)
        return EmbeddingResult(
            vectors=[[float(x) for x in row["embedding"]] for row in rows],
            model=model,
            usage=Usage(service=self.service, model=model, input_tokens=tokens),
        )
