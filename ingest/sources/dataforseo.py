"""DataForSEO v3 client: backlinks, referring domains, ranked keywords, bulk spam scores.

Basic auth with the API login and password; every call POSTs a JSON array holding one task to
a live endpoint. Each method returns a `PaidCall`: the typed result, the cost DataForSEO
reported for the task (`tasks[].cost`, never recomputed) and a `Usage` with `items_count`, so
a workflow step records its api_costs row in one line:

    listing, cost, usage = call = client.backlinks("example.com", limit=100)
    ctx.track_cost(**call.track_cost_kwargs())

Inside a step every call goes through the step's call journal (`client.HttpClient._paid_exchange`):
a retry after a crash reads the answer the lost run was given instead of paying for it again, and
the task carries the call's idempotency key as its `tag`. With an `AnswerCache` a fresh answer
to the same task is served from it, at no cost (`live`).

DataForSEO allows 2,000 calls a minute per account: by default every client of one login
shares a durable token bucket (`dataforseo:<digest of the login>`), so all workers together stay under it;
the bucket's rate is `provider_limit("dataforseo")` (`RUNLEDGER_RATE_LIMITS`, outbound.py).
A 429 is retried after its Retry-After a few times in-process and penalizes the bucket.
Errors inside a 200 (per-task status codes) raise the same classes as HTTP errors; see
`dataforseo_errors` for the mapping.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Protocol, TypeVar, Unpack

import requests

from ingest.sources.client import HttpClient, Transport
from ingest.sources.dataforseo_errors import (
    RATE_LIMIT_WAIT,
    DataForSEOAuthError,
    DataForSEOError,
    DataForSEONoResults,
    DataForSEOPaymentRequired,
    DataForSEORateLimited,
    DataForSEORequestRejected,
    DataForSEOServerError,
    DataForSEOTooManyTargets,
    DataForSEOUnavailable,
    error_class_for_status,
)
from ingest.sources.dataforseo_values import (
    Backlink,
    Listing,
    RankedKeyword,
    ReferringDomain,
    SpamScore,
    listing,
)
from ingest.sources.http import body_excerpt, retry_after_seconds
from ingest.sources.outbound import Circuit, OutboundLimiter, SharedBucket, provider_limit
from ingest.sources.seo_services import (
    DATAFORSEO_BACKLINKS,
    DATAFORSEO_KEYWORDS,
    DATAFORSEO_REFERRING_DOMAINS,
    DATAFORSEO_SPAM_SCORE,
    CostService,
    PaidCall,
    paid_call,
)
from ingest.sources.usage import cost_quantize

__all__ = [
    "MAX_SPAM_SCORE_TARGETS", "AnswerCache", "DataForSEOClient", "login_bucket_key", "spam_score_batches",
]  # fmt: skip

T = TypeVar("T")
MAX_SPAM_SCORE_TARGETS = 1000


def login_bucket_key(login: str) -> str:
    """The shared bucket of a login: `dataforseo:` and a digest of it, since the login is a
    credential (kept encrypted in its connection) and a bucket's key is a plain column."""
    return "dataforseo:" + hashlib.sha256(login.encode()).hexdigest()[:16]


def spam_score_batches(targets: Sequence[str]) -> list[list[str]]:
    """`targets` cut into batches one bulk_spam_score task accepts (1,000 each), order kept."""
    step = MAX_SPAM_SCORE_TARGETS
    return [list(targets[i : i + step]) for i in range(0, len(targets), step)]


class AnswerCache(Protocol):
    """DataForSEO's task answers kept for a while, per endpoint and task (its target and options)."""

    def get(self, endpoint: str, task: Mapping[str, Any]) -> dict[str, Any] | None:
        """The task object DataForSEO answered to this task, while it is fresh; else None."""

    def put(self, endpoint: str, task: Mapping[str, Any], answer: Mapping[str, Any]) -> None:
        """Keep `answer` (the task object, with its `cost`) as this task's answer."""


class DataForSEOClient(HttpClient):
    """Takes the transport's keywords too (`client.Transport`: base_url, timeout, session…)."""

    PROVIDER = "dataforseo"
    BASE_URL = "https://api.dataforseo.com"
    UNAVAILABLE = DataForSEOUnavailable

    def __init__(
        self,
        *,
        login: str,
        password: str,
        limiter: OutboundLimiter | None = None,
        circuit: Circuit | None = None,
        cache: AnswerCache | None = None,
        **transport: Unpack[Transport],
    ) -> None:
        super().__init__(**transport)
        self.base_url = self.base_url.rstrip("/")
        self.limiter = limiter or SharedBucket(
            login_bucket_key(login), limit=provider_limit("dataforseo"), sleep=self._sleep
        )
        # Optional: a breaker on the account, so an outage fails the steps fast (outbound.py).
        self.circuit = circuit
        # Optional: answers kept per endpoint and task for a while (`AnswerCache`).
        self.cache = cache
        self._auth = (login, password)

    # -- endpoints ---------------------------------------------------------------------------

    def backlinks(self, target: str, *, limit: int = 100, mode: str = "as_is") -> PaidCall[Listing[Backlink]]:
        """`backlinks/backlinks/live`: up to `limit` backlinks pointing at `target`."""
        task = {"target": target, "limit": limit, "mode": mode}
        return self.live(DATAFORSEO_BACKLINKS, task, target=target, parse=Backlink.from_json)

    def referring_domains(self, target: str, *, limit: int = 100) -> PaidCall[Listing[ReferringDomain]]:
        """`backlinks/referring_domains/live`: the domains linking to `target`."""
        task = {"target": target, "limit": limit}
        return self.live(DATAFORSEO_REFERRING_DOMAINS, task, target=target, parse=ReferringDomain.from_json)

    def ranked_keywords(
        self, target: str, *, limit: int = 100, location_code: int = 2840, language_code: str = "en"
    ) -> PaidCall[Listing[RankedKeyword]]:
        """`dataforseo_labs/google/ranked_keywords/live`: keywords `target` ranks for."""
        task = {"target": target, "limit": limit, "location_code": location_code,
                "language_code": language_code}  # fmt: skip
        return self.live(DATAFORSEO_KEYWORDS, task, target=target, parse=RankedKeyword.from_json)

    def bulk_spam_score(self, targets: Sequence[str]) -> PaidCall[Listing[SpamScore]]:
        """`backlinks/bulk_spam_score/live` for at most 1,000 domains or URLs in one task."""
        if not targets:
            raise DataForSEORequestRejected("bulk_spam_score needs at least one target")
        if len(targets) > MAX_SPAM_SCORE_TARGETS:
            raise DataForSEOTooManyTargets(
                f"bulk_spam_score got {len(targets)} targets; one task takes at most "
                f"{MAX_SPAM_SCORE_TARGETS} — split them with spam_score_batches()"
            )
        task = {"targets": list(targets)}
        return self.live(DATAFORSEO_SPAM_SCORE, task, target="", parse=SpamScore.from_json,
                         what=f"{len(targets)} targets")  # fmt: skip

    def user_data(self) -> dict[str, Any]:
        """`GET appendix/user_data`: the account's login, balance and limits (free: DataForSEO
        does not charge for it, so it is not journaled or costed). Raises as the paid calls do."""
        url = f"{self.base_url}/v3/appendix/user_data"

        def send() -> requests.Response:
            wait = self.limiter.acquire()
            if wait > 0:
                raise DataForSEORateLimited(
                    f"the DataForSEO rate limit of this login has no slot for {wait:.1f}s", retry_after=wait
                )
            return self._session.get(url, auth=self._auth, timeout=self.timeout)

        response = self._exchange(send, what=f"DataForSEO GET {url}")
        if response.status_code != 200:
            raise self._http_error(response, "appendix/user_data")
        try:
            payload = response.json()
        except ValueError as error:
            raise DataForSEOServerError(
                f"DataForSEO answered appendix/user_data with a body that is not JSON: "
                f"{body_excerpt(response)}; retry later",
                status=200,
            ) from error
        self._raise_for_code(payload, "appendix/user_data", what="the account", cost=None)
        task = (payload.get("tasks") or [{}])[0]
        self._raise_for_code(task, "appendix/user_data", what="the account", cost=None)
        result = task.get("result") or [{}]
        return dict(result[0] or {})

    # -- transport ---------------------------------------------------------------------------

    def live(
        self,
        service: CostService,
        task: Mapping[str, Any],
        *,
        target: str,
        parse: Callable[[Mapping[str, Any]], T],
        what: str = "",
    ) -> PaidCall[Listing[T]]:
        """POST one task to `service`'s live endpoint; its listing costed as DataForSEO says.
        `what` names the task in error messages (default: the target).

        With a `cache` holding a fresh answer to the same task, that answer is the listing and
        nothing is sent: the call costs 0 and its metadata says `cache_hit` and what it `saved`
        (what the cached answer cost). A fresh answer is put in the cache."""
        meta = {"endpoint": service.model, "target": target}
        cached = None if self.cache is None else self.cache.get(service.model, task)
        if cached is not None:
            found = listing(cached, target=target, parse=parse)
            saved = _reported(cached)
            saved = service.fallback_cost(items=found.items_count) if saved is None else saved
            return paid_call(found, service=service, items=found.items_count, reported=Decimal(0),
                             metadata={"task_id": cached.get("id"), **meta, "cache_hit": True,
                                       "saved": str(cost_quantize(saved))})  # fmt: skip
        answer = self.post_task(service.model, task, what=what or target)
        found = listing(answer, target=target, parse=parse)
        if self.cache is not None:
            self.cache.put(service.model, task, answer)
        return paid_call(
            found,
            service=service,
            items=found.items_count,
            reported=_reported(answer),
            metadata={"task_id": answer.get("id"), **meta},
        )

    def post_task(self, endpoint: str, task: Mapping[str, Any], *, what: str) -> dict[str, Any]:
        """The task object of DataForSEO's answer; raises on an HTTP, request or task error.

        A task with no search results (40102) is returned as a task with an empty result.
        With a `circuit`, the call goes through it: CircuitOpen when the breaker is open.
        """
        if self.circuit is not None:
            return self.circuit.call(lambda: self._post_task(endpoint, task, what=what))
        return self._post_task(endpoint, task, what=what)

    def _post_task(self, endpoint: str, task: Mapping[str, Any], *, what: str) -> dict[str, Any]:
        url = f"{self.base_url}/v3/{endpoint}"

        def send(key: str | None) -> requests.Response:
            # Inside a step the task carries the call's idempotency key as its `tag`, which
            # DataForSEO hands back in the task's `data`.
            return self._send(url, [dict(task) if key is None else {**task, "tag": key}])

        response = self._paid_exchange(send, what=f"DataForSEO POST {url}", request=[endpoint, dict(task)])
        if response.status_code != 200:
            raise self._http_error(response, endpoint)
        try:
            payload = response.json()
        except ValueError as error:
            raise DataForSEOServerError(
                f"DataForSEO answered {endpoint} with a body that is not JSON: "
                f"{body_excerpt(response)}; retry later", status=200,
            ) from error  # fmt: skip
        self._raise_for_code(payload, endpoint, what=what, cost=None)
        tasks = payload.get("tasks") or []
        if not tasks:
            raise DataForSEOServerError(f"DataForSEO answered {endpoint} for {what!r} without a task; retry later")
        answer = dict(tasks[0])
        cost = answer.get("cost")
        try:
            self._raise_for_code(answer, endpoint, what=what,
                                 cost=None if cost is None else Decimal(str(cost)))  # fmt: skip
        except DataForSEONoResults:
            answer["result"] = []
        return answer

    def _send(self, url: str, body: list[dict[str, Any]]) -> requests.Response:
        wait = self.limiter.acquire()
        if wait > 0:
            raise DataForSEORateLimited(
                f"the DataForSEO rate limit of this login has no slot for {wait:.1f}s; the step retries then",
                retry_after=wait,
            )
        return self._session.post(url, json=body, auth=self._auth, timeout=self.timeout)

    def _wait_for(self, response: requests.Response) -> float | None:
        if response.status_code == 429:
            # Every worker sharing the account's bucket backs off, not only this call.
            self.limiter.penalize(retry_after_seconds(response.headers) or 1.0)
        return super()._wait_for(response)

    def _raise_for_code(self, part: Mapping[str, Any], endpoint: str, *, what: str, cost: Decimal | None) -> None:
        if part.get("status_code") is None:
            raise DataForSEOServerError(
                f"DataForSEO answered {endpoint} for {what!r} without a status_code; retry later"
            )
        code = int(part["status_code"])
        cls = error_class_for_status(code)
        if cls is None:
            return
        said = f"DataForSEO {endpoint} for {what!r}: {code} {part.get('status_message')!r}"
        retry_after = RATE_LIMIT_WAIT.get(code)
        if retry_after is not None:
            self.limiter.penalize(retry_after)
        raise cls(f"{said} — {_advice(cls)}", status=200, code=code, cost=cost,
                  retry_after=retry_after)  # fmt: skip

    def _http_error(self, response: requests.Response, endpoint: str) -> DataForSEOError:
        status = response.status_code
        said = f"DataForSEO answered HTTP {status} to {endpoint}: {body_excerpt(response)}"
        cls: type[DataForSEOError]
        retry_after = retry_after_seconds(response.headers)
        if status == 429:
            retry_after = 1.0 if retry_after is None else retry_after
            return DataForSEORateLimited(
                f"{said} — still rate limited after in-process retries; retry after "
                f"{retry_after:g}s", retry_after=retry_after, status=status,
            )  # fmt: skip
        if status in (401, 403):
            cls = DataForSEOAuthError
        elif status == 402:
            cls = DataForSEOPaymentRequired
        elif status >= 500:
            cls = DataForSEOServerError
        else:
            cls = DataForSEORequestRejected
        return cls(f"{said} — {_advice(cls)}", status=status, retry_after=retry_after)


def _reported(answer: Mapping[str, Any]) -> Decimal | None:
    cost = answer.get("cost")
    return None if cost is None else Decimal(str(cost))


def _advice(cls: type[DataForSEOError]) -> str:
    if cls is DataForSEOPaymentRequired:
        return "an operator must top up or renew the DataForSEO account; retrying will not help"
    if cls is DataForSEOAuthError:
        return "check the DataForSEO API login and password"
    if cls.retryable:
        return "retry later"
    return "fix the request; retrying will not help"
