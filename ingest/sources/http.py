"""HTTP plumbing shared by the clients: timeouts, retry hints, a rate limiter.

Pure helpers (header parsing, the limiter's slot arithmetic) take the clock as an argument
so they are tested without waiting.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.sessions import merge_setting
from requests.utils import get_environ_proxies, get_netrc_auth

from ingest.engine import trace_client_span, tracing_enabled

# (connect, read) seconds. Every request passes an explicit timeout: requests has none.
Timeout = tuple[float, float]
DEFAULT_TIMEOUT: Timeout = (5.0, 60.0)
USER_AGENT = "runledger/0.1 (+ingestion pipelines)"

Clock = Callable[[], float]
Sleep = Callable[[float], None]


class Session(requests.Session):
    """A `requests.Session` that reads the environment once per scheme and host.

    With `trust_env` (the default) requests reads the proxy variables, REQUESTS_CA_BUNDLE /
    CURL_CA_BUNDLE and ~/.netrc again for every request: two scans of os.environ and up to
    three file lookups, about a fifth of the client's CPU for an LLM call. A process's
    environment does not change under it, so the answers are kept per scheme and host and
    applied exactly as requests applies them (a request's own proxies, verify and auth still
    win). Redirects re-read the environment as before; they are rare on these APIs.
    """

    def __init__(self) -> None:
        super().__init__()
        self._environment: dict[tuple[str, str], tuple[dict[str, str], str | None, Any]] = {}

    def _environment_for(self, url: str) -> tuple[dict[str, str], str | None, Any]:
        parts = urlsplit(url)
        key = (parts.scheme, parts.netloc)
        found = self._environment.get(key)
        if found is None:  # two threads may both read it: the same answer, stored twice
            bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
            found = self._environment[key] = (get_environ_proxies(url), bundle, get_netrc_auth(url))
        return found

    def prepare_request(self, request: requests.Request) -> requests.PreparedRequest:
        if self.trust_env and not request.auth and not self.auth and request.url:
            # requests would look the URL's host up in ~/.netrc here; give it the kept answer,
            # or `_no_auth` (which leaves the request as it is) when there is none and the URL
            # carries no user:password@ of its own for requests to use instead.
            url = str(request.url)
            netrc = self._environment_for(url)[2]
            if netrc is not None:
                request.auth = netrc
            elif "@" not in urlsplit(url).netloc:
                request.auth = _no_auth
        return super().prepare_request(request)

    def merge_environment_settings(self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any) -> dict[str, Any]:
        if not self.trust_env or (proxies and "no_proxy" in proxies):
            return super().merge_environment_settings(url, proxies, stream, verify, cert)
        env_proxies, bundle, _ = self._environment_for(str(url))
        if proxies is not None:
            for key, value in env_proxies.items():
                proxies.setdefault(key, value)
        if verify is True or verify is None:
            verify = bundle or verify
        return {
            "proxies": merge_setting(proxies, self.proxies),
            "stream": merge_setting(stream, self.stream),
            "verify": merge_setting(verify, self.verify),
            "cert": merge_setting(cert, self.cert),
        }

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        if not tracing_enabled():
            return super().send(request, **kwargs)
        # The call as a CLIENT span under the step attempt's, its traceparent sent along.
        with trace_client_span(str(request.method), str(request.url)) as (span, headers):
            request.headers.update(headers)
            response = super().send(request, **kwargs)
            span.set_attribute("http.response.status_code", response.status_code)
            if response.status_code >= 500:
                from opentelemetry.trace import StatusCode

                span.set_status(StatusCode.ERROR, f"HTTP {response.status_code}")
            return response


def _no_auth(request: Any) -> Any:
    return request


def new_session() -> requests.Session:
    session = Session()
    session.headers["User-Agent"] = USER_AGENT
    return session


def retry_after_seconds(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds to wait according to `retry-after-ms` or `Retry-After` (seconds or HTTP date)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def should_retry_hint(headers: Mapping[str, str]) -> bool | None:
    """The `x-should-retry` header as a bool, or None when absent or unrecognised."""
    lowered = {key.lower(): value for key, value in headers.items()}
    value = lowered.get("x-should-retry", "").strip().lower()
    return {"true": True, "false": False}.get(value)


def body_excerpt(response: requests.Response, limit: int = 300) -> str:
    text = response.text.strip().replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "…"


class RateLimiter:
    """At most `rate` acquisitions in any window of `per` seconds, shared by threads.

    Each caller reserves its slot under the lock and sleeps outside it, so waiting
    threads do not block each other's bookkeeping and slots are handed out in order.
    """

    def __init__(
        self,
        rate: int,
        per: float = 1.0,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = time.sleep,
    ) -> None:
        if rate < 1 or per <= 0:
            raise ValueError(f"rate limiter needs rate >= 1 and per > 0, got {rate}/{per}s")
        self.rate = rate
        self.per = per
        self._clock = clock
        self._sleep = sleep
        self._slots: deque[float] = deque()
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Reserve the next slot; returns how many seconds the caller must wait for it."""
        with self._lock:
            now = self._clock()
            while self._slots and self._slots[0] <= now - self.per:
                self._slots.popleft()
            slot = now
            if len(self._slots) >= self.rate:
                slot = max(now, self._slots[-self.rate] + self.per)
            self._slots.append(slot)
            return slot - now

    def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            self._sleep(wait)


def send_or_unavailable(
    send: Callable[[], requests.Response],
    *,
    unavailable: Callable[[str], Exception],
    what: str,
    read_timeout: float,
) -> requests.Response:
    """`send()`, with a timeout or a connection failure raised as the source's retryable
    `unavailable` error, whose message names `what` was sent ("Gong POST https://…")."""
    try:
        return send()
    except requests.Timeout as error:
        raise unavailable(f"{what} timed out after {read_timeout:g}s; retry later") from error
    except requests.RequestException as error:
        raise unavailable(f"{what} failed to connect ({error}); retry later") from error


def inline_429_wait(response: requests.Response, *, max_inline_wait: float) -> float | None:
    """The delay a 429 asks for (Retry-After, 1 s without one) when it is short enough to wait
    in-process; None for any other answer, or a wait long enough to give the worker back."""
    if response.status_code != 429:
        return None
    delay = retry_after_seconds(response.headers)
    delay = 1.0 if delay is None else delay
    return delay if delay <= max_inline_wait else None


def wait_and_resend(
    send: Callable[[], requests.Response],
    *,
    wait_for: Callable[[requests.Response], float | None],
    retries: int,
    sleep: Sleep,
) -> requests.Response:
    """Send; while `wait_for(response)` names a delay and retries remain, sleep and resend.

    The last response is returned as is: the caller turns it into a result or an error.
    """
    response = send()
    for _ in range(retries):
        delay = wait_for(response)
        if delay is None:
            return response
        sleep(delay)
        response = send()
    return response
