"""Fake LLM providers: an OpenAI-compatible server (chat + embeddings) and Anthropic Messages.

By default both answer the extraction prompt with the rule extractor's facts, so pipelines
get real-looking output. Script responses with `plan(route, Planned(...))`, build bodies
with `chat_completion(...)` / `anthropic_message(...)`. `delay` slows every answer.
Routes: "POST /v1/chat/completions", "POST /v1/embeddings", "POST /v1/messages".
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

from ingest.extraction.rules import RuleExtractor
from tests.fakes.server import FakeServer, Planned, Recorded

CHAT = "POST /v1/chat/completions"
EMBEDDINGS = "POST /v1/embeddings"
MESSAGES = "POST /v1/messages"


def tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def chat_completion(
    content: str | None,
    *,
    model: str = "gpt-4o-mini-2024-07-18",
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    cached_tokens: int = 0,
    deepseek: bool = False,
    finish_reason: str = "stop",
) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }
    if deepseek:
        usage |= {
            "prompt_cache_hit_tokens": cached_tokens,
            "prompt_cache_miss_tokens": prompt_tokens - cached_tokens,
        }
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 1741000000, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
        "usage": usage,
    }  # fmt: skip


def anthropic_message(
    text: str, *, model: str = "claude-3-5-haiku-20241022", input_tokens: int = 100,
    output_tokens: int = 20, cache_read: int = 0, stop_reason: str = "end_turn",
) -> dict[str, Any]:  # fmt: skip
    return {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": text}], "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": cache_read},
    }  # fmt: skip


def _facts_json(user_text: str) -> str:
    match = re.match(r"Account: (?P<subject>.+)\n", user_text)
    subject = match["subject"] if match else "deal"
    return json.dumps(RuleExtractor().extract(user_text, subject=subject).data)


def hashed_embedding(text: str, dim: int = 64) -> list[float]:
    """Bag of hashed words, normalised: sentences sharing words point the same way."""
    vector = [0.0] * dim
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class FakeOpenAI(FakeServer):
    """OpenAI-compatible; `deepseek=True` adds DeepSeek's prompt_cache_hit/miss fields."""

    def __init__(self, *, api_key: str | None = "sk-fake", deepseek: bool = False) -> None:
        super().__init__()
        self.api_key = api_key
        self.deepseek = deepseek
        self._seen_prefixes: set[str] = set()
        self.route("POST", "/v1/chat/completions", self._chat)
        self.route("POST", "/v1/embeddings", self._embeddings)
        self.route("GET", "/v1/models", self._models)

    def _models(self, request: Recorded, _: re.Match[str]) -> Planned:
        denied = self._denied(request)
        return denied or Planned(
            200,
            {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "owned_by": "fake"} for m in ("gpt-4o-mini", "text-embedding-3-small")
                ],
            },
        )

    def _denied(self, request: Recorded) -> Planned | None:
        if self.api_key is None or request.header("Authorization") == f"Bearer {self.api_key}":
            return None
        error = {
            "message": "Incorrect API key provided",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
        return Planned(401, {"error": error})

    def _chat(self, request: Recorded, _: re.Match[str]) -> Planned:
        denied = self._denied(request)
        if denied:
            return denied
        body = request.json()
        messages = body.get("messages") or []
        system = "".join(m["content"] for m in messages if m["role"] == "system")
        user = "\n".join(m["content"] for m in messages if m["role"] == "user")
        # Providers cache a repeated prompt prefix: the second call with this system prompt hits.
        cached = tokens(system) if system in self._seen_prefixes else 0
        self._seen_prefixes.add(system)
        content = _facts_json(user)
        return Planned(200, chat_completion(
            content, model=body.get("model", "gpt-4o-mini"), prompt_tokens=tokens(system) + tokens(user),
            completion_tokens=tokens(content), cached_tokens=cached, deepseek=self.deepseek,
        ))  # fmt: skip

    def _embeddings(self, request: Recorded, _: re.Match[str]) -> Planned:
        denied = self._denied(request)
        if denied:
            return denied
        body = request.json()
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [{"object": "embedding", "index": i, "embedding": hashed_embedding(t)} for i, t in enumerate(inputs)]
        used = sum(tokens(t) for t in inputs)
        return Planned(200, {"object": "list", "data": data, "model": body.get("model"),
                             "usage": {"prompt_tokens": used, "total_tokens": used}})  # fmt: skip


class FakeAnthropic(FakeServer):
    def __init__(self, *, api_key: str = "sk-ant-fake") -> None:
        super().__init__()
        self.api_key = api_key
        self._seen_systems: set[str] = set()
        self.route("POST", "/v1/messages", self._messages)
        self.route("GET", "/v1/models", self._models)

    def _models(self, request: Recorded, _: re.Match[str]) -> Planned:
        if request.header("x-api-key") != self.api_key or not request.header("anthropic-version"):
            return Planned(
                401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
            )
        return Planned(200, {"data": [{"type": "model", "id": "claude-3-5-haiku-latest"}], "has_more": False})

    def _messages(self, request: Recorded, _: re.Match[str]) -> Planned:
        if request.header("x-api-key") != self.api_key or not request.header("anthropic-version"):
            error = {"type": "authentication_error", "message": "invalid x-api-key"}
            return Planned(401, {"type": "error", "error": error})
        body = request.json()
        system = body.get("system") or ""
        user = "\n".join(m["content"] for m in body.get("messages") or [] if m["role"] == "user")
        cached = tokens(system) if system in self._seen_systems else 0
        self._seen_systems.add(system)
        text = _facts_json(user)
        return Planned(200, anthropic_message(
            text, model=body.get("model", "claude-3-5-haiku-20241022"),
            input_tokens=tokens(system) + tokens(user) - cached, output_tokens=tokens(text), cache_read=cached,
        ))  # fmt: skip
