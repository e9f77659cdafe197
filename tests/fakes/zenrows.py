"""A fake ZenRows Universal Scraper API, and the fake web sites it (and the native fetch) reads.

`GET /v1/?apikey=…&url=…&js_render=true&premium_proxy=true` answers the page with ZenRows'
headers (`X-Request-Cost`, `Zr-Final-Url`, `X-Request-Id`, `Concurrency-Limit/Remaining`) or
its JSON errors (`{"code": "RESP001", "status": 422, "title": …, "detail": …}`).
`GET /site/<host>/<path>` is the same page fetched natively: what a bot-protected site shows a
plain client is a 403 challenge page. Pages are deterministic per URL, with title, h1, meta
description, body text, and pricing, login, affiliate and social-profile markers that follow
the path (`/pricing` has prices, `/login` a password form…).

Scripting: hosts in `protected` block the native fetch (a Cloudflare-style challenge), hosts in
`premium_only` also make ZenRows basic fail with RESP001 (only premium gets through), hosts in
`gone` answer 404; `latency=(lo, hi)` slows every answer deterministically; past
`concurrency` requests in flight it answers 429 AUTH006 as ZenRows does; `fake.plan(ROUTE_API,
Planned(429, error_body("AUTH006", 429), {"Retry-After": "1"}))` for anything else. `billed`
sums every cost the fake reported.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterable
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from tests.fakes.dataforseo import WORDS, rng_for
from tests.fakes.server import FakeServer, Planned, Recorded

ROUTE_API = "GET /v1/"
ROUTE_SITE = "GET /site/(?P<rest>.*)"
COSTS = {"plain": Decimal("0.0001"), "js": Decimal("0.001"), "premium": Decimal("0.01")}
TITLES = {
    "AUTH002": "API key is invalid", "AUTH004": "Usage exceeded", "AUTH006": "Concurrency limit",
    "AUTH008": "Rate limit exceeded", "RESP001": "Could not get content", "RESP002": "Not found",
    "REQS004": "Invalid parameters", "BLK0001": "IP address blocked",
}  # fmt: skip
CHALLENGE = (
    "<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>"
    '<script src="/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1"></script>'
    "<noscript>Enable JavaScript and cookies to continue</noscript></body></html>"
)


def error_body(code: str, status: int, detail: str = "") -> dict[str, Any]:
    return {
        "code": code, "status": status, "title": TITLES.get(code, code), "instance": "/v1/",
        "detail": detail or TITLES.get(code, code),
        "type": f"https://docs.zenrows.com/api-error-codes#{code}",
    }  # fmt: skip


def page_html(url: str) -> str:
    """A deterministic page for `url`, with the markers its path suggests."""
    rng = rng_for("page", url)
    parts = urlsplit(url)
    path = parts.path.lower()
    topic = " ".join(rng.choice(WORDS) for _ in range(2)).title()
    words = [rng.choice(WORDS) for _ in range(rng.randint(150, 900))]
    extra = []
    if "pricing" in path or "plans" in path:
        extra.append('<section class="pricing"><h2>Plans</h2><p>Starter $19/month</p>'
                     '<p>Pro $49/month, billed annually</p></section>')  # fmt: skip
    if "login" in path or "signin" in path:
        extra.append(
            '<form action="/session"><input type="email" name="email">'
            '<input type="password" name="password"><button>Sign in</button></form>'
        )
    if "review" in path or "best" in path:
        extra.append(
            '<a href="https://amzn.to/3xYz" rel="sponsored nofollow">Buy on Amazon</a>'
            "<p>As an Amazon Associate we earn from qualifying purchases.</p>"
        )
    extra.append(f'<footer><a href="https://www.youtube.com/@{rng.choice(WORDS)}">YouTube</a>'
                 f'<a href="https://x.com/{rng.choice(WORDS)}">X</a></footer>')  # fmt: skip
    return (
        f"<!DOCTYPE html><html><head><title>{topic} | {parts.netloc}</title>"
        f'<meta name="description" content="{topic}: {" ".join(words[:20])}."></head>'
        f"<body><h1>{topic}</h1><p>{' '.join(words)}</p>{''.join(extra)}</body></html>"
    )


class FakeZenRows(FakeServer):
    def __init__(
        self,
        *,
        api_key: str = "zr-key",
        protected: Iterable[str] = (),
        premium_only: Iterable[str] = (),
        gone: Iterable[str] = (),
        latency: tuple[float, float] | None = None,
        concurrency: int | None = None,
    ) -> None:
        super().__init__()
        self.api_key = api_key
        self.concurrency = concurrency
        self._busy_until: list[float] = []  # when each request in flight will have answered
        self.premium_only = set(premium_only)
        self.protected = set(protected) | self.premium_only
        self.gone = set(gone)
        self.latency = latency
        self.billed = Decimal(0)
        self._billing = threading.Lock()
        self.route("GET", "/v1/", self._api)
        self.route("GET", "/v1/subscriptions/self/details", self._usage)
        self.route("GET", "/site/(?P<rest>.*)", self._site)

    def site_url(self, host: str, path: str = "/") -> str:
        """The URL a native fetch of `host` + `path` reads on this fake."""
        return f"{self.url}/site/{host}{path}"

    def _host(self, url: str) -> str:
        prefix = f"{self.url}/site/"
        if url.startswith(prefix):
            return url[len(prefix) :].split("/", 1)[0]
        return urlsplit(url).netloc

    def _delay(self, url: str) -> float:
        if self.latency is None:
            return 0.0
        low, high = self.latency
        return low + (high - low) * rng_for("latency", url).random()

    def _site(self, request: Recorded, match: re.Match[str]) -> Planned:
        url = f"{self.url}{request.path}"
        host = self._host(url)
        if host in self.gone:
            return Planned(404, "<html><title>Not found</title></html>")
        if host in self.protected:
            return Planned(403, CHALLENGE, {"Content-Type": "text/html", "cf-mitigated": "challenge",
                                            "Server": "cloudflare"})  # fmt: skip
        return Planned(200, page_html(url), {"Content-Type": "text/html; charset=utf-8"})

    def _usage(self, request: Recorded, _: re.Match[str]) -> Planned:
        """The plan's usage, free, with the key in `X-API-Key` as ZenRows reads it there."""
        if request.header("X-API-Key") != self.api_key:
            return Planned(401, error_body("AUTH002", 401))
        return Planned(
            200,
            {
                "plan": "Developer",
                "usage_percent": 12.5,
                "usage": float(self.billed),
                "period_ending": "2026-12-31T00:00:00Z",
                "concurrency_limit": 25,
            },
        )

    def _api(self, request: Recorded, _: re.Match[str]) -> Planned:
        query = {k: v[0] for k, v in request.query.items()}
        if not query.get("apikey"):
            return Planned(401, error_body("AUTH001", 401, "API key is missing"))
        if query["apikey"] != self.api_key:
            return Planned(401, error_body("AUTH002", 401))
        url = query.get("url", "")
        if not url.startswith(("http://", "https://")):
            return Planned(400, error_body("REQS004", 400, f"url {url!r} is not a valid URL"))
        js = query.get("js_render") == "true"
        premium = query.get("premium_proxy") == "true"
        host, delay = self._host(url), self._delay(url)
        if host in self.gone:
            return Planned(404, error_body("RESP002", 404), delay=delay)
        if host in self.premium_only and not premium:
            return Planned(422, error_body("RESP001", 422), delay=delay)
        cost = COSTS["premium"] if premium else COSTS["js"] if js else COSTS["plain"]
        with self._billing:
            self._busy_until = [t for t in self._busy_until if t > request.at]
            if self.concurrency is not None and len(self._busy_until) >= self.concurrency:
                return Planned(429, error_body("AUTH006", 429), {"Retry-After": "1"})
            self._busy_until.append(request.at + delay)
            self.billed += cost
        headers = {
            "Content-Type": "text/html; charset=utf-8", "X-Request-Cost": str(cost),
            "X-Request-Id": uuid.uuid4().hex, "Zr-Final-Url": url,
            "Concurrency-Limit": "25", "Concurrency-Remaining": "24",
        }  # fmt: skip
        return Planned(200, page_html(url), headers, delay=delay)
