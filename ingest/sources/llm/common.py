"""What the LLM and embedding clients share: errors, message shape, JSON parsing, and `JsonApi`,
the request, retry-hint and error plumbing of a provider's JSON endpoints."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict, Unpack

import requests

from ingest.sources import errors
from ingest.sources.breakers import guarded_send
from ingest.sources.errors import SourceError
from ingest.sources.http import (
    DEFAULT_TIMEOUT,
    Sleep,
    Timeout,
    body_excerpt,
    new_session,
    retry_after_seconds,
    should_retry_hint,
    wait_and_resend,
)
from ingest.sources.journal import journaled
from ingest.sources.usage import Usage


class LLMError(SourceError):
    """The LLM provider returned an unexpected answer."""


class LLMRateLimited(LLMError, errors.RateLimited):
    """The LLM provider is rate limiting us; retry after the delay it asked for."""


class LLMServerError(LLMError, errors.ServerError):
    """The LLM provider failed (5xx or overloaded); retry later."""


class LLMUnavailable(LLMError, errors.Unavailable):
    """The LLM provider could not be reached or did not answer in time; retry later."""


class LLMAuthError(LLMError, errors.AuthError):
    """The LLM provider refused our API key; fix the key in the settings."""


class LLMRequestRejected(LLMError, errors.RequestRejected):
    """The LLM provider rejected the request as invalid; fix the request, do not retry."""


class LLMInvalidOutput(LLMError):
    """The model answered with blank or non-JSON content; a new attempt may do better."""

    retryable = True


@dataclass(frozen=True)
class LLMResult:
    """One completion: the parsed JSON `data`, its `usage`, the answering model, raw text."""

    data: dict[str, Any]
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    raw_text: str = ""


class ChatMessage(TypedDict):
    role: str  # "system" | "user" | "assistant"
    content: str


class LLMClient(Protocol):
    def complete_json(self, messages: Sequence[ChatMessage], *, max_tokens: int | None = None) -> LLMResult: ...


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def parse_json_object(text: str | None, *, provider: str, model: str) -> dict[str, Any]:
    """The JSON object in `text` (code fences tolerated), or LLMInvalidOutput."""
    stripped = (text or "").strip()
    if not stripped:
        raise LLMInvalidOutput(
            f"{provider} model {model!r} returned blank content; retry the step "
            "(JSON mode can answer blank when the prompt does not mention JSON)"
        )
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1)
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError as error:
        raise LLMInvalidOutput(
            f"{provider} model {model!r} returned content that is not JSON ({error.msg} at "
            f"char {error.pos}): {stripped[:120]!r}; retry the step"
        ) from error
    if not isinstance(data, dict):
        raise LLMInvalidOutput(
            f"{provider} model {model!r} returned JSON {type(data).__name__}, not an object; retry the step"
        )
    return data


def _retryable_status(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


def error_for_response(response: requests.Response, *, provider: str, model: str, detail: str = "") -> LLMError:
    """The error for a non-2xx answer, honouring `x-should-retry` and the retry hints."""
    status = response.status_code
    hint = should_retry_hint(response.headers)
    retryable = _retryable_status(status) if hint is None else hint
    retry_after = retry_after_seconds(response.headers) if retryable else None
    what = f"{provider} answered HTTP {status} to model {model!r}: {detail or body_excerpt(response)}"
    cls: type[LLMError]
    if status == 429:
        cls, advice = LLMRateLimited, "retry after the delay"
    elif status in (401, 403):
        cls, advice = LLMAuthError, "check the API key and the model's access"
    elif status >= 500 or retryable:
        cls, advice = LLMServerError, "retry later"
    else:
        cls, advice = LLMRequestRejected, "fix the request; retrying will not help"
    if hint is False and _retryable_status(status):
        advice = "the provider said not to retry (x-should-retry: false)"
    return cls(f"{what} — {advice}", retryable=retryable, retry_after=retry_after, status=status)


def post_json(
    session: requests.Session,
    url: str,
    *,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    timeout: tuple[float, float],
    retries: int,
    max_inline_wait: float,
    sleep: Sleep,
    provider: str,
) -> requests.Response:
    """POST, waiting in-process for short server-given retry delays (at most `retries` times).

    Longer or missing hints are left to the engine: the caller raises a retryable error
    with `retry_after`, and the step is retried later without holding a worker thread. Inside
    a step each request goes through the breaker of `provider` and the instance's tenant.
    """

    def send() -> requests.Response:
        try:
            return session.post(url, json=body, headers=dict(headers), timeout=timeout)
        except requests.Timeout as error:
            raise LLMUnavailable(f"{provider} at {url} did not answer within {timeout[1]:g}s; retry later") from error
        except requests.RequestException as error:
            raise LLMUnavailable(f"{provider} at {url} is unreachable ({error}); retry later") from error

    return wait_and_resend(
        lambda: guarded_send(provider, send),
        wait_for=_inline_wait(max_inline_wait),
        retries=retries,
        sleep=sleep,
    )


def _inline_wait(max_inline_wait: float) -> Callable[[requests.Response], float | None]:
    def wait_for(response: requests.Response) -> float | None:
        if response.ok:
            return None
        hint = should_retry_hint(response.headers)
        if hint is False or (hint is None and not _retryable_status(response.status_code)):
            return None
        delay = retry_after_seconds(response.headers)
        return delay if delay is not None and delay <= max_inline_wait else None

    return wait_for


def response_json(response: requests.Response, *, provider: str, model: str) -> dict[str, Any]:
    try:
        payload = response.json()
    except ValueError as error:
        raise LLMServerError(
            f"{provider} answered HTTP {response.status_code} with a body that is not JSON "
            f"for model {model!r}: {body_excerpt(response)}; retry later"
        ) from error
    if not isinstance(payload, dict):
        raise LLMServerError(f"{provider} answered with JSON that is not an object; retry later")
    return payload


def bearer_headers(api_key: str | None) -> dict[str, str]:
    """JSON headers with `Authorization: Bearer <key>`, or none without a key (local servers)."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


class TransportOptions(TypedDict, total=False):
    """How a client talks to its provider: the keywords every LLM and embedding client takes.

    `timeout` (connect, read) per request; `max_retries` in-process resends when the provider
    asks for a delay of at most `max_inline_wait` seconds (longer waits are the engine's);
    `session` to share connections; `sleep` for tests.
    """

    timeout: Timeout
    max_retries: int
    max_inline_wait: float
    session: requests.Session | None
    sleep: Sleep


class JsonApi:
    """A provider's JSON API: POST a body, wait out short retry hints, map a non-2xx answer to
    an `LLMError` subclass, return the answer's JSON object.

    `error_detail` reads the provider's own error text out of a non-2xx answer (Anthropic's
    `{"error": {...}}`); without it the error quotes the start of the body.
    `idempotency_header` names the header that carries a call's idempotency key inside a step
    (`Idempotency-Key` on OpenAI-compatible APIs); None sends none.
    """

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        error_detail: Callable[[requests.Response], str] | None = None,
        idempotency_header: str | None = None,
        **transport: Unpack[TransportOptions],
    ) -> None:
        self.provider = provider
        self.idempotency_header = idempotency_header
        self.base_url = base_url.rstrip("/")
        self.timeout: Timeout = transport.get("timeout", DEFAULT_TIMEOUT)
        self.max_retries = transport.get("max_retries", 2)
        self.max_inline_wait = transport.get("max_inline_wait", 10.0)
        self.session = transport.get("session") or new_session()
        self.sleep: Sleep = transport.get("sleep", time.sleep)
        self._error_detail = error_detail

    def post(self, path: str, *, body: Mapping[str, Any], headers: Mapping[str, str], model: str) -> dict[str, Any]:
        """The JSON object the provider answered to `POST {base_url}{path}`; raises LLMError
        subclasses (they carry retryable and retry_after).

        Inside a step the call goes through the step's call journal: a retry after a crash reads
        the answer the lost run was given instead of paying again. With `idempotency_header`
        the call's idempotency key is sent in it."""

        def send(key: str | None) -> requests.Response:
            sent = dict(headers)
            if key is not None and self.idempotency_header:
                sent[self.idempotency_header] = key
            return post_json(
                self.session,
                f"{self.base_url}{path}",
                body=body,
                headers=sent,
                timeout=self.timeout,
                retries=self.max_retries,
                max_inline_wait=self.max_inline_wait,
                sleep=self.sleep,
                provider=self.provider,
            )

        response = journaled(self.provider, send, request=[self.base_url, path, body])
        if not response.ok:
            detail = self._error_detail(response) if self._error_detail else ""
            raise error_for_response(response, provider=self.provider, model=model, detail=detail)
        return response_json(response, provider=self.provider, model=model)

    def get(self, path: str, *, headers: Mapping[str, str], model: str) -> dict[str, Any]:
        """The JSON object the provider answered to `GET {base_url}{path}` (a free read such as the
        model list: not journaled, no idempotency key); raises LLMError subclasses."""

        def send() -> requests.Response:
            url = f"{self.base_url}{path}"
            try:
                return self.session.get(url, headers=dict(headers), timeout=self.timeout)
            except requests.Timeout as error:
                raise LLMUnavailable(
                    f"{self.provider} at {url} did not answer within {self.timeout[1]:g}s; retry later"
                ) from error
            except requests.RequestException as error:
                raise LLMUnavailable(
                    f"{self.provider} at {url} is unreachable ({type(error).__name__}); retry later"
                ) from error

        response = guarded_send(self.provider, send)
        if not response.ok:
            detail = self._error_detail(response) if self._error_detail else ""
            raise error_for_response(response, provider=self.provider, model=model, detail=detail)
        return response_json(response, provider=self.provider, model=model)


def model_ids(payload: Mapping[str, Any]) -> list[str]:
    """The ids of a model list (`{"data": [{"id": …}, …]}`, as OpenAI and Anthropic answer)."""
    return [str(m.get("id")) for m in payload.get("data") or [] if isinstance(m, dict) and m.get("id")]
