"""ZenRows (Universal Scraper API) and the native fetch the content cascade tries first.

ZenRows: `GET https://api.zenrows.com/v1/?apikey=…&url=…&js_render=true&premium_proxy=true`.
The body is the page; `X-Request-Cost` says what the request cost in USD (0.001 for a basic
request; recorded as reported, never recomputed), `Zr-Final-Url` where redirects ended,
`Concurrency-Remaining` the plan's headroom. Errors are JSON with a code (`AUTH004`,
`RESP001`…) mapped below to retryable or not. ZenRows bills successful requests only, so a
failed one records no cost.

Two paid tiers: basic is `js_render` (ZENROWS_BASIC), premium adds `premium_proxy`
(ZENROWS_PREMIUM). `fetch_cascade` runs native → basic → premium as `page_fetch.next_method`
decides and returns every paid attempt with its cost, so each gets its api_costs row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Unpack

import requests

from ingest.sources import errors
from ingest.sources.client import HttpClient, Transport
from ingest.sources.errors import SourceError, SourceErrorOptions
from ingest.sources.http import Timeout, body_excerpt, new_session, retry_after_seconds
from ingest.sources.page_fetch import FetchMethod, FetchResult, blocked_reason, next_method
from ingest.sources.seo_services import ZENROWS_BASIC, ZENROWS_PREMIUM, PaidCall, paid_call

__all__ = [
    "CascadeResult", "NativeFetcher", "ZenRowsAuthError", "ZenRowsClient", "ZenRowsCouldNotFetch",
    "ZenRowsError", "ZenRowsPaymentRequired", "ZenRowsRateLimited", "ZenRowsRequestRejected",
    "ZenRowsServerError", "ZenRowsTargetGone", "ZenRowsUnavailable", "error_for_code",
    "fetch_cascade",
]  # fmt: skip


class ZenRowsError(SourceError):
    """ZenRows returned an unexpected answer."""

    def __init__(self, message: str | None = None, *, code: str = "", **options: Unpack[SourceErrorOptions]) -> None:
        super().__init__(message, **options)
        self.code = code  # ZenRows' error code, e.g. "AUTH004"


class ZenRowsAuthError(ZenRowsError, errors.AuthError):
    """ZenRows refused the API key (AUTH001-003, AUTH009); fix the key."""


class ZenRowsPaymentRequired(ZenRowsError, errors.PaymentRequired):
    """ZenRows refused to serve the plan (402: usage exceeded, expired, feature not in plan)."""


class ZenRowsBlocked(ZenRowsError):
    """ZenRows blocked our IP for a high error rate (BLK0001); an operator must look."""

    needs_operator = True


class ZenRowsRateLimited(ZenRowsError, errors.RateLimited):
    """ZenRows is over the plan's concurrency or rate (429 AUTH006/AUTH008); retry later."""


class ZenRowsCouldNotFetch(ZenRowsError):
    """ZenRows could not get the page (RESP001, captcha RESP006, REQS002); a higher tier may."""

    retryable = True


class ZenRowsTargetGone(ZenRowsError):
    """The page does not exist (RESP002 404, RESP007 DNS); no tier will fetch it."""


class ZenRowsServerError(ZenRowsError, errors.ServerError):
    """ZenRows failed (5xx); retry later."""


class ZenRowsUnavailable(ZenRowsError, errors.Unavailable):
    """ZenRows could not be reached or timed out (CTX0002); retry later."""


class ZenRowsRequestRejected(ZenRowsError, errors.RequestRejected):
    """ZenRows rejected the request (400, 413); fix it, do not retry."""


_BY_CODE: dict[str, type[ZenRowsError]] = {
    "AUTH001": ZenRowsAuthError, "AUTH002": ZenRowsAuthError, "AUTH003": ZenRowsAuthError,
    "AUTH009": ZenRowsAuthError, "AUTH004": ZenRowsPaymentRequired,
    "AUTH005": ZenRowsPaymentRequired, "AUTH010": ZenRowsPaymentRequired,
    "AUTH011": ZenRowsPaymentRequired, "AUTH012": ZenRowsPaymentRequired,
    "AUTH006": ZenRowsRateLimited, "AUTH008": ZenRowsRateLimited, "BLK0001": ZenRowsBlocked,
    "REQS002": ZenRowsCouldNotFetch, "RESP001": ZenRowsCouldNotFetch,
    "RESP006": ZenRowsCouldNotFetch, "RESP002": ZenRowsTargetGone, "RESP007": ZenRowsTargetGone,
    "RESP003": ZenRowsServerError, "CTX0002": ZenRowsUnavailable,
}  # fmt: skip
_BY_STATUS: dict[int, type[ZenRowsError]] = {
    401: ZenRowsAuthError, 402: ZenRowsPaymentRequired, 403: ZenRowsAuthError,
    404: ZenRowsTargetGone, 422: ZenRowsCouldNotFetch, 424: ZenRowsCouldNotFetch,
    429: ZenRowsRateLimited, 504: ZenRowsUnavailable,
}  # fmt: skip


def error_for_code(code: str, status: int) -> type[ZenRowsError]:
    """The error class for ZenRows' error code, else for the HTTP status."""
    if code in _BY_CODE:
        return _BY_CODE[code]
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ZenRowsServerError if status >= 500 else ZenRowsRequestRejected


def reported_cost(headers: Mapping[str, str]) -> Decimal | None:
    value = next((v for k, v in headers.items() if k.lower() == "x-request-cost"), None)
    try:
        return None if value is None else Decimal(value.strip())
    except InvalidOperation:
        return None


class ZenRowsClient(HttpClient):
    """Takes the transport's keywords too (`client.Transport`: base_url, timeout, session…)."""

    PROVIDER = "zenrows"
    BASE_URL = "https://api.zenrows.com/v1/"  # requested as it is: the trailing slash stays
    TIMEOUT = (5.0, 90.0)  # rendering a page takes tens of seconds
    UNAVAILABLE = ZenRowsUnavailable

    def __init__(self, *, api_key: str, **transport: Unpack[Transport]) -> None:
        super().__init__(**transport)
        self._api_key = api_key

    def fetch(self, url: str, *, js_render: bool = True, premium_proxy: bool = False) -> PaidCall[FetchResult]:
        """The page at `url` through ZenRows, costed from `X-Request-Cost`."""
        params = {"apikey": self._api_key, "url": url}
        if js_render:
            params["js_render"] = "true"
        if premium_proxy:
            params["premium_proxy"] = "true"
        # Journaled (a retry after a crash reads the page it paid for); ZenRows takes no
        # idempotency key, so the call's key is not sent.
        response = self._paid_exchange(
            lambda _key: self._session.get(self.base_url, params=params, timeout=self.timeout),
            what=f"ZenRows fetching {url}",
            request=[url, js_render, premium_proxy],
        )
        if not response.ok:
            raise self._error(response, url)
        method: FetchMethod = "zenrows_premium" if premium_proxy else "zenrows_basic"
        final = response.headers.get("Zr-Final-Url") or url
        page = FetchResult(url=url, method=method, status=response.status_code,
                           html=response.text, final_url=final)  # fmt: skip
        return paid_call(
            page, service=ZENROWS_PREMIUM if premium_proxy else ZENROWS_BASIC, items=1,
            reported=reported_cost(response.headers),
            metadata={"request_id": response.headers.get("X-Request-Id", ""), "url": url},
        )  # fmt: skip

    def usage(self) -> dict[str, object]:
        """`GET subscriptions/self/details`: the plan and what of it is used (free: not a
        scraping request, so it is neither journaled nor costed). The key goes in `X-API-Key`."""
        url = self.base_url.rstrip("/") + "/subscriptions/self/details"
        response = self._exchange(
            lambda: self._session.get(url, headers={"X-API-Key": self._api_key}, timeout=self.timeout),
            what=f"ZenRows GET {url}",
        )
        if not response.ok:
            raise self._error(response, url)
        try:
            body = response.json()
        except ValueError as error:
            raise ZenRowsServerError(
                f"ZenRows answered {url} with a body that is not JSON: {body_excerpt(response)}",
                status=response.status_code,
            ) from error
        return dict(body) if isinstance(body, dict) else {}

    def _error(self, response: requests.Response, url: str) -> ZenRowsError:
        try:
            body = response.json()
        except ValueError:
            body = {}
        code = str(body.get("code") or "") if isinstance(body, dict) else ""
        cls = error_for_code(code, response.status_code)
        retry_after = retry_after_seconds(response.headers)
        if cls is ZenRowsRateLimited and retry_after is None:
            retry_after = 1.0
        said = (f"ZenRows answered HTTP {response.status_code} {code or ''} fetching {url}: "
                f"{body_excerpt(response)}")  # fmt: skip
        advice = ("an operator must act on the ZenRows account" if cls.needs_operator
                  else "retry later" if cls.retryable else "retrying will not help")  # fmt: skip
        return cls(f"{said} — {advice}", code=code, status=response.status_code,
                   retry_after=retry_after)  # fmt: skip


class NativeFetcher:
    """A plain GET of the page (free), answered as a `FetchResult` with its block verdict."""

    def __init__(self, *, timeout: Timeout = (5.0, 20.0), session: requests.Session | None = None) -> None:
        self.timeout = timeout
        self._session = session or new_session()
        self._session.headers["Accept"] = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"

    def fetch(self, url: str) -> FetchResult:
        try:
            response = self._session.get(url, timeout=self.timeout, allow_redirects=True)
        except requests.RequestException as error:
            # A reset or a timeout is often a firewall's answer: the cascade escalates.
            return FetchResult(url=url, method="native", status=0, blocked="unreachable",
                               error=f"{type(error).__name__}: {error}")  # fmt: skip
        html = response.text
        return FetchResult(
            url=url, method="native", status=response.status_code, html=html,
            final_url=response.url,
            blocked=blocked_reason(response.status_code, html, dict(response.headers)),
        )  # fmt: skip


@dataclass(frozen=True)
class CascadeResult:
    """The page (None when every tier failed), every attempt in order, and what was paid."""

    page: FetchResult | None
    attempts: tuple[FetchResult, ...]
    paid: tuple[PaidCall[FetchResult], ...]

    @property
    def method(self) -> FetchMethod | None:
        return None if self.page is None else self.page.method

    @property
    def cost(self) -> Decimal:
        return sum((call.cost for call in self.paid), Decimal(0))


def fetch_cascade(
    url: str,
    *,
    native: NativeFetcher,
    zenrows: ZenRowsClient | None,
    start: FetchMethod = "native",
    before_paid: Callable[[FetchMethod], None] | None = None,
) -> CascadeResult:
    """Fetch `url` the cheapest way that works, from `start` (the method that last worked on
    this domain). Without a ZenRows client the cascade stops after the native fetch. Errors only
    an operator or a later retry can fix (auth, payment, rate limit) are raised.

    `before_paid(method)` runs before each ZenRows request (a step reserves its budget there;
    raising stops the cascade before the spend)."""
    attempts: list[FetchResult] = []
    paid: list[PaidCall[FetchResult]] = []
    method: FetchMethod | None = start
    while method is not None:
        if method == "native":
            result = native.fetch(url)
        elif zenrows is None:
            break
        else:
            if before_paid is not None:
                before_paid(method)
            result = _zenrows_attempt(zenrows, url, method, paid)
        attempts.append(result)
        if result.ok:
            return CascadeResult(result, tuple(attempts), tuple(paid))
        method = next_method(result)
    return CascadeResult(None, tuple(attempts), tuple(paid))


def _zenrows_attempt(
    client: ZenRowsClient, url: str, method: FetchMethod, paid: list[PaidCall[FetchResult]]
) -> FetchResult:
    try:
        call = client.fetch(url, js_render=True, premium_proxy=method == "zenrows_premium")
    except (ZenRowsCouldNotFetch, ZenRowsServerError, ZenRowsUnavailable) as error:
        return FetchResult(url=url, method=method, status=error.status or 0,
                           blocked="zenrows_failed", error=str(error))  # fmt: skip
    except ZenRowsTargetGone as error:
        return FetchResult(url=url, method=method, status=404, error=str(error))
    paid.append(call)
    return call.result
