from __future__ import annotations

import pytest

from ingest.sources.embeddings import OpenAIEmbeddings, WordLlamaEmbedder, cosine_similarity
from ingest.sources.llm import LLMRateLimited
from tests.fakes import FakeOpenAI, Planned
from tests.fakes.llm import EMBEDDINGS

pytestmark = pytest.mark.pure

SIMILAR = (
    "The customer approved the budget for next year.",
    "The client signed off on next year's spending.",
)
UNRELATED = "Heavy rain flooded the streets of Paris all week."


def test_wordllama_puts_similar_sentences_closer_than_unrelated_ones() -> None:
    result = WordLlamaEmbedder().embed([*SIMILAR, UNRELATED])
    a, b, c = result.vectors

    assert len(a) == 256
    assert cosine_similarity(a, b) > cosine_similarity(a, c) + 0.1
    assert result.usage.service == "wordllama" and result.usage.items == 3


def test_wordllama_of_nothing_is_nothing() -> None:
    assert WordLlamaEmbedder().embed([]).vectors == []


def test_cosine_similarity_of_known_vectors() -> None:
    assert cosine_similarity([1, 0], [1, 0]) == 1.0
    assert cosine_similarity([1, 0], [0, 1]) == 0.0
    assert cosine_similarity([0, 0], [1, 1]) == 0.0
    with pytest.raises(ValueError, match="dimensions"):
        cosine_similarity([1], [1, 2])


def test_openai_embeddings_come_back_in_input_order_with_usage(fake_openai: FakeOpenAI) -> None:
    client = OpenAIEmbeddings(base_url=f"{fake_openai.url}/v1", api_key="sk-fake")

    result = client.embed(["budget approved", "budget approved today", UNRELATED])

    assert cosine_similarity(*result.vectors[:2]) > cosine_similarity(result.vectors[0], result.vectors[2])
    assert result.usage.input_tokens > 0 and result.model == "text-embedding-3-small"
    assert fake_openai.requests_to(EMBEDDINGS)[0].json()["encoding_format"] == "float"


def test_openai_embeddings_rate_limit_is_retryable(fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(EMBEDDINGS, Planned(429, {"error": {"message": "slow"}}, {"retry-after": "90"}))

    with pytest.raises(LLMRateLimited) as caught:
        OpenAIEmbeddings(base_url=f"{fake_openai.url}/v1", api_key="sk-fake").embed(["x"])

    assert caught.value.retry_after == 90.0
