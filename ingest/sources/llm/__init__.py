"""LLM providers: OpenAI-compatible chat completions and Anthropic Messages.

Both clients offer `complete_json(messages, *, max_tokens=None) -> LLMResult` and raise
`LLMError` subclasses that carry `retryable` and `retry_after`.
"""

from ingest.sources.llm.anthropic import AnthropicClient
from ingest.sources.llm.common import (
    ChatMessage,
    LLMAuthError,
    LLMClient,
    LLMError,
    LLMInvalidOutput,
    LLMRateLimited,
    LLMRequestRejected,
    LLMResult,
    LLMServerError,
    LLMUnavailable,
    parse_json_object,
)
from ingest.sources.llm.openai import OpenAIChatClient, usage_from_openai

__all__ = [
    "AnthropicClient",
    "ChatMessage",
    "LLMAuthError",
    "LLMClient",
    "LLMError",
    "LLMInvalidOutput",
    "LLMRateLimited",
    "LLMRequestRejected",
    "LLMResult",
    "LLMServerError",
    "LLMUnavailable",
    "OpenAIChatClient",
    "parse_json_object",
    "usage_from_openai",
]
