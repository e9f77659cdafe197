"""The base every HTTP client of an outside system stands on: its transport settings and the
round trip they share.

Gong, ZenRows and DataForSEO each hold a base URL, a `(connect, read)` timeout, a session, and
the same exchange: send; a network failure or a timeout becomes the client's retryable
"unavailable" error naming what was sent; a 429 that asks for a short wait is waited out
in-process and resent, a few times at most; inside a step, every request goes through the
circuit breaker of the client's provider and the instance's tenant (`breakers.guarded_send`).
A paid call (DataForSEO, ZenRows) goes through `_paid_exchange`: the exchange, journaled in the
step's call journal, so a retry after a crash reads the answer instead of paying again
(`journal.journaled`). `HttpClient` holds that once; a client sets its provider, defaults and
error as class attributes and adds its credentials and its own limits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar, TypedDict, Unpack

import requests

from ingest.sources.breakers import guarded_send
from ingest.sources.errors import SourceError
from ingest.sources.http import (
    DEFAULT_TIMEOUT,
    Sleep,
    Timeout,
    inline_429_wait,
    new_session,
    send_or_unavailable,
    wait_and_resend,
)
from ingest.sources.journal import journaled


class Transport(TypedDict, total=False):
    """The keyword arguments every client takes besides its credentials; each left out takes
    the client's default (`HttpClient.BASE_URL` …)."""

    base_url: str
    timeout: Timeout
    max_rate_limit_retries: int
    max_inline_wait: float
    session: requests.Session | None
    sleep: Sleep


class HttpClient:
    """A client's transport: `base_url`, `timeout`, `max_rate_limit_retries` (in-process resends
    of a 429), `max_inline_wait` (the longest 429 wait slept through in-process; a longer one is
    the client's error with `retry_after`), the session and the sleep (tests pass their own)."""

    #: The provider's name in breaker keys (`gong:acme`) and on the breakers page.
    PROVIDER: ClassVar[str]
    BASE_URL: ClassVar[str]
    TIMEOUT: ClassVar[Timeout] = DEFAULT_TIMEOUT
    RATE_LIMIT_RETRIES: ClassVar[int] = 2
    INLINE_WAIT: ClassVar[float] = 10.0
    #: Raised, retryable, when the call cannot reach the system or times out.
    UNAVAILABLE: ClassVar[type[SourceError]]

    def __init__(self, **transport: Unpack[Transport]) -> None:
        unknown = sorted(set(transport) - set(Transport.__annotations__))
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword arguments: {', '.join(unknown)}")
        self.base_url = transport.get("base_url", self.BASE_URL)
        self.timeout = transport.get("timeout", self.TIMEOUT)
        self.max_rate_limit_retries = transport.get("max_rate_limit_retries", self.RATE_LIMIT_RETRIES)
        self.max_inline_wait = transport.get("max_inline_wait", self.INLINE_WAIT)
        self._session = transport.get("session") or new_session()
        self._sleep = transport.get("sleep", time.sleep)

    def _wait_for(self, response: requests.Response) -> float | None:
        """The delay before resending `response`'s request, or None to hand it back as it is."""
        return inline_429_wait(response, max_inline_wait=self.max_inline_wait)

    def _exchange(self, send: Callable[[], requests.Response], *, what: str) -> requests.Response:
        """`send()`, a network failure raised as `UNAVAILABLE` naming `what` ("Gong POST
        https://…"), resent while `_wait_for` names a delay and resends remain. The last
        response is returned as is: the client turns it into a result or an error. Each request
        goes through the provider's breaker (`CircuitOpen`, unsent, when it is open)."""
        return wait_and_resend(
            lambda: guarded_send(
                self.PROVIDER,
                lambda: send_or_unavailable(
                    send, unavailable=self.UNAVAILABLE, what=what, read_timeout=self.timeout[1]
                ),
            ),
            wait_for=self._wait_for,
            retries=self.max_rate_limit_retries,
            sleep=self._sleep,
        )

    def _paid_exchange(
        self, send: Callable[[str | None], requests.Response], *, what: str, request: object
    ) -> requests.Response:
        """`_exchange` of a paid call, through the step's call journal: a call a lost run of the
        step was answered is not sent again. `send(key)` gets the call's idempotency key (None
        outside a step) to pass on where the provider takes one; `request` identifies the call
        (no credentials in it)."""
        return journaled(self.PROVIDER, lambda key: self._exchange(lambda: send(key), what=what), request=request)
