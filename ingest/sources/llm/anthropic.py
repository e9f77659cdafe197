"""Anthropic Messages API (`POST /v1/messages`), asked for a JSON object."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Unpack

import requests

from ingest.sources.llm.common import (
    ChatMessage,
    JsonApi,
    LLMInvalidOutput,
    LLMResult,
    TransportOptions,
    model_ids,
    parse_json_object,
)
from ingest.sources.usage import Usage

JSON_INSTRUCTION = "Answer with one JSON object only: no prose, no code fences."


def usage_from_anthropic(usage: Mapping[str, Any] | None, *, model: str) -> Usage:
    """Anthropic's `input_tokens` excludes cache reads and writes; ours includes them."""
    usage = usage or {}
    read = int(usage.get("cache_read_input_tokens") or 0)
    written = int(usage.get("cache_creation_input_tokens") or 0)
    return Usage(
        service="anthropic",
        model=model,
        input_tokens=int(usage.get("input_tokens") or 0) + read + written,
        cached_input_tokens=read,
        output_tokens=int(usage.get("output_tokens") or 0),
    )


class AnthropicClient:
    """Claude through the Messages API; system messages become the `system` parameter.

    `on_usage` is called with the usage of every answer that reports one, before its content
    is checked: an answer cut off at max_tokens or not JSON is billed too.
    """

    def __init__(
        self,
        *,
        api_key: str,
        model: str = "claude-3-5-haiku-latest",
        base_url: str = "https://api.anthropic.com",
        version: str = "2023-06-01",
        max_tokens: int = 4096,
        on_usage: Callable[[Usage], None] | None = None,
        **transport: Unpack[TransportOptions],
    ) -> None:
        self.model = model
        self.version = version
        self.on_usage = on_usage
        self.max_tokens = max_tokens
        self._api_key = api_key
        self._api = JsonApi(provider="anthropic", base_url=base_url, error_detail=_error_detail, **transport)

    def _body(self, messages: Sequence[ChatMessage], max_tokens: int | None) -> dict[str, Any]:
        system = [m["content"] for m in messages if m["role"] == "system"]
        return {
            "model": self.model,
            "max_tokens": max_tokens or self.max_tokens,
            "temperature": 0,
            "system": "\n\n".join([*system, JSON_INSTRUCTION]),
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"],
        }

    def complete_json(self, messages: Sequence[ChatMessage], *, max_tokens: int | None = None) -> LLMResult:
        """One message parsed as a JSON object; raises LLMError subclasses."""
        payload = self._api.post(
            "/v1/messages",
            body=self._body(messages, max_tokens),
            headers={
                "x-api-key": self._api_key,
                "anthropic-version": self.version,
                "content-type": "application/json",
            },
            model=self.model,
        )
        model = str(payload.get("model") or self.model)
        usage = usage_from_anthropic(payload.get("usage"), model=model)
        if self.on_usage is not None and isinstance(payload.get("usage"), dict):
            self.on_usage(usage)
        if payload.get("stop_reason") == "max_tokens":
            raise LLMInvalidOutput(
                f"anthropic model {model!r} stopped at max_tokens, so its JSON is cut off; "
                "raise max_tokens or shorten the input, then retry"
            )
        text = "".join(block.get("text", "") for block in payload.get("content") or [] if block.get("type") == "text")
        data = parse_json_object(text, provider="anthropic", model=model)
        return LLMResult(data=data, usage=usage, model=model, raw_text=text)

    def models(self) -> list[str]:
        """`GET /v1/models`: the ids of the models this key may use (free)."""
        return model_ids(
            self._api.get(
                "/v1/models", headers={"x-api-key": self._api_key, "anthropic-version": self.version}, model=self.model
            )
        )


def _error_detail(response: requests.Response) -> str:
    """`{"type": "error", "error": {"type": "rate_limit_error", "message": …}}` → text."""
    try:
        error = response.json().get("error") or {}
    except (ValueError, AttributeError):
        return ""
    return f"{error.get('type', 'error')}: {error.get('message', '')}".strip()
