"""Gong API v2 client: calls, transcripts and extensive call data.

Basic auth with an access key and secret. Gong allows 3 calls per second per company: the
client takes a slot from its `limiter` before every request — in the pipelines the durable
token bucket every worker shares (`outbound.SharedBucket`, keyed by the access key), so all
workers together stay under the limit; on its own, a limiter of this process. A slot further
away than the limiter sleeps through is `GongRateLimited` with `retry_after`. A 429 blocks the
shared bucket for its `Retry-After` and is retried after it a few times in-process; then
`GongRateLimited` carries `retry_after` to the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar, Unpack

import requests

from ingest.sources import errors
from ingest.sources.client import HttpClient, Transport
from ingest.sources.errors import SourceError
from ingest.sources.gong_values import (
    GongCall,
    GongExtensiveCall,
    GongParty,
    GongTranscript,
    GongWebhook,
    WebhookInvalid,
    parse_webhook,
)
from ingest.sources.http import RateLimiter, body_excerpt, retry_after_seconds
from ingest.sources.outbound import InProcess, OutboundLimiter

__all__ = [
    "GongAuthError", "GongCall", "GongClient", "GongError", "GongExtensiveCall", "GongParty",
    "GongRateLimited", "GongRequestRejected", "GongServerError", "GongTranscript",
    "GongUnavailable", "GongWebhook", "Page", "WebhookInvalid", "parse_webhook",
]  # fmt: skip

T = TypeVar("T")


class GongError(SourceError):
    """Gong returned an unexpected answer."""


class GongRateLimited(GongError, errors.RateLimited):
    """Gong is rate limiting us (429); retry after `retry_after` seconds."""


class GongServerError(GongError, errors.ServerError):
    """Gong failed (5xx); retry later."""


class GongUnavailable(GongError, errors.Unavailable):
    """Gong could not be reached or did not answer in time; retry later."""


class GongAuthError(GongError, errors.AuthError):
    """Gong refused the access key (401/403); fix the credentials or the key's scopes."""


class GongRequestRejected(GongError, errors.RequestRejected):
    """Gong rejected the request as invalid (4xx); fix the request, do not retry."""


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of results; `cursor` is None on the last page."""

    items: tuple[T, ...]
    cursor: str | None = None
    total: int | None = None


def gong_time(value: datetime) -> str:
    if value.tzinfo is None:
        raise ValueError(f"Gong needs timezone-aware times; got naive {value.isoformat()}")
    return value.isoformat()


def _is_no_calls(response: requests.Response) -> bool:
    return response.status_code == 404 and "no calls found" in response.text.lower()


class GongClient(HttpClient):
    """Takes the transport's keywords too (`client.Transport`: base_url, timeout, session…)."""

    PROVIDER = "gong"
    BASE_URL = "https://api.gong.io"
    RATE_LIMIT_RETRIES = 3
    INLINE_WAIT = 30.0
    UNAVAILABLE = GongUnavailable

    def __init__(
        self,
        *,
        access_key: str,
        access_key_secret: str,
        limiter: OutboundLimiter | None = None,
        **transport: Unpack[Transport],
    ) -> None:
        super().__init__(**transport)
        self.base_url = self.base_url.rstrip("/")
        self.limiter = limiter or InProcess(RateLimiter(3, 1.0, sleep=self._sleep))
        self._auth = (access_key, access_key_secret)

    # -- calls -------------------------------------------------------------------------------

    def calls_page(
        self,
        *,
        from_time: datetime,
        to_time: datetime,
        cursor: str | None = None,
        workspace_id: str | None = None,
    ) -> Page[GongCall]:
        """`GET /v2/calls` for calls started in [from_time, to_time); empty when none."""
        params = {"fromDateTime": gong_time(from_time), "toDateTime": gong_time(to_time)}
        if workspace_id:
            params["workspaceId"] = workspace_id
        if cursor:
            params["cursor"] = cursor
        payload = self._request("GET", "/v2/calls", params=params)
        return _page(payload, "calls", GongCall.from_json)

    def iter_calls(self, *, from_time: datetime, to_time: datetime) -> Iterator[GongCall]:
        yield from _follow(lambda cursor: self.calls_page(from_time=from_time, to_time=to_time, cursor=cursor))

    # -- transcripts -------------------------------------------------------------------------

    def transcripts_page(
        self,
        *,
        call_ids: Sequence[str] | None = None,
        from_time: datetime | None = None,
        to_time: datetime | None = None,
        cursor: str | None = None,
    ) -> Page[GongTranscript]:
        """`POST /v2/calls/transcript` filtered by call ids and/or a time range."""
        body = {"filter": _filter(call_ids, from_time, to_time), **_cursor(cursor)}
        payload = self._request("POST", "/v2/calls/transcript", body=body)
        return _page(payload, "callTranscripts", GongTranscript.from_json)

    def iter_transcripts(self, call_ids: Sequence[str]) -> Iterator[GongTranscript]:
        yield from _follow(lambda cursor: self.transcripts_page(call_ids=call_ids, cursor=cursor))

    def transcript(self, call_id: str) -> GongTranscript | None:
        return next(self.iter_transcripts([str(call_id)]), None)

    # -- extensive ---------------------------------------------------------------------------

    def extensive_page(
        self,
        *,
        call_ids: Sequence[str] | None = None,
        from_time: datetime | None = None,
        to_time: datetime | None = None,
        cursor: str | None = None,
        parties: bool = True,
        content: bool = True,
    ) -> Page[GongExtensiveCall]:
        """`POST /v2/calls/extensive`; `contentSelector` asks for parties and content."""
        selector: dict[str, Any] = {"context": "Extended", "exposedFields": {"parties": parties}}
        if content:
            selector["exposedFields"]["content"] = {
                "brief": True, "keyPoints": True, "outline": True, "topics": True,
                "trackers": True, "callOutcome": True, "highlights": True,
            }  # fmt: skip
        body = {
            "filter": _filter(call_ids, from_time, to_time),
            "contentSelector": selector,
            **_cursor(cursor),
        }
        payload = self._request("POST", "/v2/calls/extensive", body=body)
        return _page(payload, "calls", GongExtensiveCall.from_json)

    def iter_extensive(self, call_ids: Sequence[str]) -> Iterator[GongExtensiveCall]:
        yield from _follow(lambda cursor: self.extensive_page(call_ids=call_ids, cursor=cursor))

    # -- transport ---------------------------------------------------------------------------

    def _send(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        wait = self.limiter.acquire()
        if wait > 0:
            raise GongRateLimited(
                f"the Gong rate limit of this access key has no slot for {wait:.1f}s; retry then",
                retry_after=wait,
            )
        return self._session.request(method, url, auth=self._auth, timeout=self.timeout, **kwargs)

    def _wait_for(self, response: requests.Response) -> float | None:
        if response.status_code == 429:
            # Every worker sharing the access key's bucket backs off, not only this call.
            self.limiter.penalize(retry_after_seconds(response.headers) or 1.0)
        return super()._wait_for(response)

    def _request(
        self, method: str, path: str, *, params: Mapping[str, str] | None = None, body: Any = None
    ) -> dict[str, Any] | None:
        """The JSON answer, or None for Gong's "no calls found" 404."""
        url = f"{self.base_url}{path}"
        response = self._exchange(
            lambda: self._send(method, url, params=params, json=body), what=f"Gong {method} {url}"
        )
        if response.ok:
            return dict(response.json())
        if _is_no_calls(response):
            return None
        raise _error(response, f"{method} {path}")


def _error(response: requests.Response, what: str) -> GongError:
    status = response.status_code
    said = f"Gong answered HTTP {status} to {what}: {body_excerpt(response)}"
    if status == 429:
        delay = retry_after_seconds(response.headers)
        return GongRateLimited(
            f"{said} — still rate limited after in-process retries; retry after {delay or 1:g}s",
            retry_after=delay if delay is not None else 1.0,
            status=status,
        )
    if status in (401, 403):
        return GongAuthError(f"{said} — check the access key, secret and API scopes", status=status)
    if status >= 500:
        return GongServerError(
            f"{said} — retry later",
            status=status,
            retry_after=retry_after_seconds(response.headers),
        )
    return GongRequestRejected(f"{said} — fix the request; retrying will not help", status=status)


def _filter(call_ids: Sequence[str] | None, from_time: datetime | None, to_time: datetime | None) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if call_ids is not None:
        result["callIds"] = [str(call_id) for call_id in call_ids]
    if from_time is not None:
        result["fromDateTime"] = gong_time(from_time)
    if to_time is not None:
        result["toDateTime"] = gong_time(to_time)
    return result


def _cursor(cursor: str | None) -> dict[str, str]:
    return {"cursor": cursor} if cursor else {}


def _page(payload: Mapping[str, Any] | None, key: str, parse: Callable[[Mapping[str, Any]], T]) -> Page[T]:
    if payload is None:
        return Page(items=(), cursor=None, total=0)
    records = payload.get("records") or {}
    return Page(
        items=tuple(parse(item) for item in payload.get(key) or []),
        cursor=records.get("cursor") or None,
        total=records.get("totalRecords"),
    )


def _follow(fetch: Callable[[str | None], Page[T]]) -> Iterator[T]:
    cursor: str | None = None
    while True:
        page = fetch(cursor)
        yield from page.items
        if not page.cursor:
            return
        cursor = page.cursor
