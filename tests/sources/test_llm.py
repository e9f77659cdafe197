from __future__ import annotations

import contextlib
import json

import pytest

from ingest.extraction import facts_from_result
from ingest.extraction.prompt import LLMFactExtractor, extraction_messages
from ingest.sources.llm import (
    AnthropicClient,
    LLMAuthError,
    LLMError,
    LLMInvalidOutput,
    LLMRateLimited,
    LLMServerError,
    LLMUnavailable,
    OpenAIChatClient,
    usage_from_openai,
)
from ingest.sources.usage import Usage
from tests.fakes import FakeAnthropic, FakeOpenAI, Planned
from tests.fakes.llm import CHAT, MESSAGES, anthropic_message, chat_completion

pytestmark = pytest.mark.pure

TRANSCRIPT = "Dana Whitfield: Our budget for this is $120,000 and we are also looking at Clari."


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def openai_for(fake: FakeOpenAI, **kwargs: object) -> OpenAIChatClient:
    return OpenAIChatClient(base_url=f"{fake.url}/v1", api_key="sk-fake", **kwargs)  # type: ignore[arg-type]


def test_it_asks_for_json_at_temperature_zero(fake_openai: FakeOpenAI) -> None:
    openai_for(fake_openai).complete_json(extraction_messages(TRANSCRIPT, subject="Acme"))

    body = fake_openai.requests_to(CHAT)[0].json()
    assert body["response_format"] == {"type": "json_object"}
    assert body["temperature"] == 0 and body["model"] == "gpt-4o-mini"
    assert fake_openai.requests_to(CHAT)[0].header("Authorization") == "Bearer sk-fake"


def test_it_returns_parsed_facts_with_usage_and_cached_tokens(fake_openai: FakeOpenAI) -> None:
    extractor = LLMFactExtractor(openai_for(fake_openai))
    extractor.extract(TRANSCRIPT, subject="Acme")

    result = extractor.extract(TRANSCRIPT, subject="Acme")

    facts = {(f.subject, f.predicate, f.object) for f in facts_from_result(result)}
    assert ("Acme", "budget", "USD 120000") in facts
    assert result.usage.service == "openai" and result.usage.model == "gpt-4o-mini"
    assert result.usage.input_tokens > result.usage.cached_input_tokens > 0
    assert result.usage.output_tokens > 0
    assert json.loads(result.raw_text) == result.data


def test_deepseek_cache_hit_and_miss_fields_are_read() -> None:
    usage = usage_from_openai(
        {
            "prompt_tokens": 1000,
            "completion_tokens": 50,
            "prompt_cache_hit_tokens": 768,
            "prompt_cache_miss_tokens": 232,
        },
        service="deepseek",
        model="deepseek-chat",
    )

    assert usage == Usage("deepseek", "deepseek-chat", input_tokens=1000, cached_input_tokens=768, output_tokens=50)


def test_a_deepseek_server_reports_cache_hits_on_the_second_call() -> None:
    with FakeOpenAI(deepseek=True) as fake:
        client = openai_for(fake, model="deepseek-chat", service="deepseek")
        first = client.complete_json(extraction_messages(TRANSCRIPT, subject="Acme"))
        second = client.complete_json(extraction_messages(TRANSCRIPT, subject="Acme"))

    assert first.usage.cached_input_tokens == 0 and second.usage.cached_input_tokens > 0


def test_a_429_with_retry_after_ms_is_waited_out(fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(CHAT, Planned(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "250"}))
    sleeps = Sleeps()

    result = openai_for(fake_openai, sleep=sleeps).complete_json(extraction_messages(TRANSCRIPT, subject="Acme"))

    assert sleeps == [0.25] and "facts" in result.data
    assert fake_openai.count(CHAT) == 2


def test_a_persistent_429_raises_with_the_retry_delay(fake_openai: FakeOpenAI) -> None:
    throttled = Planned(429, {"error": {"message": "slow down"}}, {"retry-after": "42"})
    fake_openai.plan(CHAT, throttled)

    with pytest.raises(LLMRateLimited) as caught:
        openai_for(fake_openai, sleep=Sleeps()).complete_json(extraction_messages(TRANSCRIPT, subject="A"))

    assert caught.value.retryable and caught.value.retry_after == 42.0
    assert fake_openai.count(CHAT) == 1  # 42 s is longer than the inline wait: the engine waits


def test_x_should_retry_false_makes_a_500_final(fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(CHAT, Planned(500, {"error": {"message": "boom"}}, {"x-should-retry": "false"}))

    with pytest.raises(LLMServerError) as caught:
        openai_for(fake_openai).complete_json(extraction_messages(TRANSCRIPT, subject="A"))

    assert not caught.value.retryable and "x-should-retry: false" in str(caught.value)


def test_x_should_retry_true_makes_a_400_retryable(fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(CHAT, Planned(400, {"error": {"message": "try again"}}, {"x-should-retry": "true"}))

    with pytest.raises(LLMServerError) as caught:
        openai_for(fake_openai, max_retries=0).complete_json(extraction_messages(TRANSCRIPT, subject="A"))

    assert caught.value.retryable


def test_a_500_is_retryable(fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(CHAT, Planned(500, {"error": {"message": "internal"}}))

    with pytest.raises(LLMServerError) as caught:
        openai_for(fake_openai).complete_json(extraction_messages(TRANSCRIPT, subject="A"))

    assert caught.value.retryable and caught.value.status == 500


@pytest.mark.parametrize("content", ["", "   ", None, '{"facts": [', "Sure! Here are the facts.", "[1, 2]"])
def test_blank_or_malformed_json_content_is_a_retryable_error(fake_openai: FakeOpenAI, content: str | None) -> None:
    fake_openai.plan(CHAT, Planned(200, chat_completion(content)))

    with pytest.raises(LLMInvalidOutput) as caught:
        openai_for(fake_openai).complete_json(extraction_messages(TRANSCRIPT, subject="A"))

    assert caught.value.retryable


def test_a_completion_cut_off_at_the_token_limit_is_retryable(fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(CHAT, Planned(200, chat_completion('{"facts": []}', finish_reason="length")))

    with pytest.raises(LLMInvalidOutput, match="token limit"):
        openai_for(fake_openai).complete_json(extraction_messages(TRANSCRIPT, subject="A"))


def test_a_wrong_api_key_is_not_retryable(fake_openai: FakeOpenAI) -> None:
    client = OpenAIChatClient(base_url=f"{fake_openai.url}/v1", api_key="sk-wrong")

    with pytest.raises(LLMAuthError) as caught:
        client.complete_json(extraction_messages(TRANSCRIPT, subject="A"))

    assert not caught.value.retryable


def test_an_unreachable_server_is_retryable() -> None:
    with FakeOpenAI() as fake:
        url = fake.url
    with pytest.raises(LLMUnavailable) as caught:
        OpenAIChatClient(base_url=f"{url}/v1").complete_json(extraction_messages(TRANSCRIPT, subject="A"))

    assert caught.value.retryable and "unreachable" in str(caught.value)


def test_anthropic_sends_key_version_and_system_and_reads_usage(
    fake_anthropic: FakeAnthropic,
) -> None:
    client = AnthropicClient(api_key="sk-ant-fake", base_url=fake_anthropic.url)
    client.complete_json(extraction_messages(TRANSCRIPT, subject="Acme"))

    result = client.complete_json(extraction_messages(TRANSCRIPT, subject="Acme"))

    request = fake_anthropic.requests_to(MESSAGES)[0]
    assert request.header("x-api-key") == "sk-ant-fake" and request.header("anthropic-version") == "2023-06-01"
    body = request.json()
    assert body["system"].startswith("You extract facts") and [m["role"] for m in body["messages"]] == ["user"]
    assert result.usage.service == "anthropic" and result.usage.cached_input_tokens > 0
    assert result.usage.input_tokens > result.usage.cached_input_tokens
    assert ("Acme", "competitor_mentioned", "Clari") in {
        (f.subject, f.predicate, f.object) for f in facts_from_result(result)
    }


def test_anthropic_overloaded_is_retryable_with_retry_after(fake_anthropic: FakeAnthropic) -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake_anthropic.plan(MESSAGES, Planned(529, error, {"retry-after": "30"}))

    with pytest.raises(LLMServerError) as caught:
        AnthropicClient(api_key="sk-ant-fake", base_url=fake_anthropic.url).complete_json(
            extraction_messages(TRANSCRIPT, subject="A")
        )

    assert caught.value.retryable and caught.value.retry_after == 30.0
    assert "overloaded_error" in str(caught.value)


def test_anthropic_text_in_code_fences_is_still_parsed(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.plan(MESSAGES, Planned(200, anthropic_message('```json\n{"facts": []}\n```')))

    result = AnthropicClient(api_key="sk-ant-fake", base_url=fake_anthropic.url).complete_json(
        extraction_messages(TRANSCRIPT, subject="A")
    )

    assert result.data == {"facts": []} and result.model == "claude-3-5-haiku-20241022"


@pytest.mark.parametrize(
    "answer",
    [
        chat_completion("", prompt_tokens=300, completion_tokens=7),
        chat_completion('{"facts": [', prompt_tokens=300, completion_tokens=7),
        chat_completion('{"facts": []}', prompt_tokens=300, completion_tokens=7, finish_reason="length"),
        chat_completion('{"facts": []}', prompt_tokens=300, completion_tokens=7),
    ],
)
def test_every_answer_reporting_usage_is_passed_to_on_usage_also_when_its_content_is_rejected(
    fake_openai: FakeOpenAI, answer: dict[str, object]
) -> None:
    """The provider bills answers the client rejects; the caller meters them through on_usage."""
    seen: list[Usage] = []
    fake_openai.plan(CHAT, Planned(200, answer))

    with contextlib.suppress(LLMInvalidOutput):  # the blank, malformed and cut-off answers
        openai_for(fake_openai, on_usage=seen.append).complete_json(extraction_messages(TRANSCRIPT, subject="A"))

    assert seen == [Usage("openai", "gpt-4o-mini-2024-07-18", 300, 0, 7)]


def test_answers_without_usage_or_refused_are_not_passed_to_on_usage(fake_openai: FakeOpenAI) -> None:
    seen: list[Usage] = []
    no_usage = {k: v for k, v in chat_completion('{"facts": []}').items() if k != "usage"}
    fake_openai.plan(CHAT, Planned(200, no_usage), Planned(400, {"error": {"message": "bad"}}))
    client = openai_for(fake_openai, on_usage=seen.append, max_retries=0)

    assert client.complete_json(extraction_messages(TRANSCRIPT, subject="A")).data == {"facts": []}
    with pytest.raises(LLMError):
        client.complete_json(extraction_messages(TRANSCRIPT, subject="A"))
    assert seen == []


def test_an_anthropic_answer_cut_off_at_max_tokens_is_passed_to_on_usage(fake_anthropic: FakeAnthropic) -> None:
    seen: list[Usage] = []
    fake_anthropic.plan(
        MESSAGES,
        Planned(
            200,
            anthropic_message('{"facts": [', input_tokens=50, output_tokens=9, cache_read=10, stop_reason="max_tokens"),
        ),
    )
    client = AnthropicClient(api_key="sk-ant-fake", base_url=fake_anthropic.url, on_usage=seen.append)

    with pytest.raises(LLMInvalidOutput, match="max_tokens"):
        client.complete_json(extraction_messages(TRANSCRIPT, subject="A"))

    assert seen == [Usage("anthropic", "claude-3-5-haiku-20241022", 60, 10, 9)]
