"""OpenAI-compatible chat completions (OpenAI, DeepSeek, vLLM, Ollama, …) in JSON mode."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict, Unpack

from ingest.sources.llm.common import (
    ChatMessage,
    JsonApi,
    LLMInvalidOutput,
    LLMResult,
    TransportOptions,
    bearer_headers,
    model_ids,
    parse_json_object,
)
from ingest.sources.usage import Usage


class OpenAIUsage(TypedDict, total=False):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: dict[str, int]
    prompt_cache_hit_tokens: int  # DeepSeek
    prompt_cache_miss_tokens: int  # DeepSeek


def usage_from_openai(usage: Mapping[str, Any] | None, *, service: str, model: str) -> Usage:
    """Usage from an OpenAI-style `usage` object, including cached-prompt counts.

    OpenAI reports cached prompt tokens in `prompt_tokens_details.cached_tokens`; DeepSeek
    reports `prompt_cache_hit_tokens` and `prompt_cache_miss_tokens` (hit + miss = prompt).
    """
    usage = usage or {}
    hit = usage.get("prompt_cache_hit_tokens")
    miss = usage.get("prompt_cache_miss_tokens")
    details = usage.get("prompt_tokens_details") or {}
    prompt = usage.get("prompt_tokens")
    if prompt is None and (hit is not None or miss is not None):
        prompt = int(hit or 0) + int(miss or 0)
    cached = hit if hit is not None else details.get("cached_tokens", 0)
    return Usage(
        service=service,
        model=model,
        input_tokens=int(prompt or 0),
        cached_input_tokens=int(cached or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
    )


class OpenAIChatClient:
    """`POST {base_url}/chat/completions` with `response_format: json_object`, temperature 0.

    `base_url` includes the version prefix: `https://api.openai.com/v1`,
    `https://api.deepseek.com/v1`, `http://localhost:8000/v1` (vLLM),
    `http://localhost:11434/v1` (Ollama). `api_key=None` sends no Authorization header.
    `service` names the provider in usage and cost rows ("openai", "deepseek", …).
    `on_usage` is called with the usage of every answer that reports one, before its content
    is checked: a blank or malformed answer is billed too.
    """

    def __init__(
        self,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        model: str = "gpt-4o-mini",
        service: str = "openai",
        json_mode: bool = True,
        on_usage: Callable[[Usage], None] | None = None,
        **transport: Unpack[TransportOptions],
    ) -> None:
        self.model = model
        self.service = service
        self.on_usage = on_usage
        self.json_mode = json_mode
        self._api_key = api_key
        self._api = JsonApi(provider=service, base_url=base_url, idempotency_header="Idempotency-Key", **transport)

    def _body(self, messages: Sequence[ChatMessage], max_tokens: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(message) for message in messages],
            "temperature": 0,
        }
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        return body

    def complete_json(self, messages: Sequence[ChatMessage], *, max_tokens: int | None = None) -> LLMResult:
        """One chat completion parsed as a JSON object; raises LLMError subclasses."""
        payload = self._api.post(
            "/chat/completions",
            body=self._body(messages, max_tokens),
            headers=bearer_headers(self._api_key),
            model=self.model,
        )
        model = str(payload.get("model") or self.model)
        usage = usage_from_openai(payload.get("usage"), service=self.service, model=model)
        if self.on_usage is not None and isinstance(payload.get("usage"), dict):
            self.on_usage(usage)
        text = _first_message_content(payload, provider=self.service, model=model)
        data = parse_json_object(text, provider=self.service, model=model)
        return LLMResult(data=data, usage=usage, model=model, raw_text=text)

    def models(self) -> list[str]:
        """`GET {base_url}/models`: the ids of the models this key may use (free)."""
        return model_ids(self._api.get("/models", headers=bearer_headers(self._api_key), model=self.model))


def _first_message_content(payload: Mapping[str, Any], *, provider: str, model: str) -> str:
    choices = payload.get("choices") or []
    if not choices:
        raise LLMInvalidOutput(f"{provider} model {model!r} returned no choices; retry the step")
    choice = choices[0]
    message = choice.get("message") or {}
    if choice.get("finish_reason") == "length":
        raise LLMInvalidOutput(
            f"{provider} model {model!r} stopped at the token limit, so its JSON is cut off; "
            "raise max_tokens or shorten the input, then retry"
        )
    return str(message.get("content") or "")
