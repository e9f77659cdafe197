"""A fake DataForSEO v3: the four live endpoints of the RankDisco pipelines and the free
`appendix/user_data` (the account's login and balance), basic auth.

Answers as DataForSEO does: HTTP 200 with a top-level `status_code` and one task per request,
whose own `status_code`, `cost` and `result` carry the outcome. The data is deterministic per
target (the same domain always gets the same backlinks, keywords and scores), drawn from a pool
of real-looking URLs on the platforms the URL rules know (YouTube, GitHub, Reddit, news…).

Scripting:
- `task_errors={"broke.example": 40200}`: that target's task fails inside a 200;
- `latency=(2.0, 5.0)`: each answer takes a deterministic time in that range (the bench);
- `calls_per_minute=2000`: past that many requests in the last 60 s it answers HTTP 429 with a
  Retry-After saying when the oldest leaves the window;
- `fake.plan(ROUTE_BACKLINKS, Planned(429, headers={"Retry-After": "1"}))`, or
  `Planned(200, envelope([task_json(...)]))` for any hand-made answer.
`billed` sums every cost the fake reported, to reconcile a run's api_costs rows against it.
"""

from __future__ import annotations

import base64
import hashlib
import math
import random
import re
import threading
import uuid
from collections import deque
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from tests.fakes.server import FakeServer, Planned, Recorded

ROUTE_BACKLINKS = "POST /v3/backlinks/backlinks/live"
ROUTE_REFERRING = "POST /v3/backlinks/referring_domains/live"
ROUTE_KEYWORDS = "POST /v3/dataforseo_labs/google/ranked_keywords/live"
ROUTE_SPAM = "POST /v3/backlinks/bulk_spam_score/live"
ROUTE_USER_DATA = "GET /v3/appendix/user_data"

MESSAGES = {
    20000: "Ok.", 40000: "You can set only one task at a time.",
    40100: "You are not authorized to access this resource.",
    40101: "Internal SE Server Error.", 40102: "No Search Results.",
    40200: "Payment Required.", 40201: "Your account was suspended.",
    40202: "Rate-limit per minute exceeded.", 40209: "Your requests are sent too frequently.",
    40501: "Invalid Field.", 40503: "POST Data Is Invalid.", 50000: "Internal Error.",
}  # fmt: skip
# (per task, per item) as DataForSEO bills the live endpoints.
PRICES = {
    "backlinks": (Decimal("0.02"), Decimal("0.00003")),
    "referring_domains": (Decimal("0.02"), Decimal("0.00003")),
    "ranked_keywords": (Decimal("0.01"), Decimal("0.0001")),
    "bulk_spam_score": (Decimal("0"), Decimal("0.00002")),
}
SOURCES = (
    "https://www.youtube.com/watch?v={id}", "https://github.com/{word}/{word2}",
    "https://medium.com/@{word}/{word2}-{id}", "https://www.reddit.com/r/{word}/comments/{id}/{word2}/",
    "https://{word}.substack.com/p/{word2}", "https://www.nytimes.com/2025/03/14/technology/{word2}.html",
    "https://techcrunch.com/2025/02/11/{word}-{word2}/", "https://en.wikipedia.org/wiki/{Word}",
    "https://news.ycombinator.com/item?id={num}", "https://www.producthunt.com/posts/{word}-{word2}",
    "https://dev.to/{word}/{word2}-{id}", "https://stackoverflow.com/questions/{num}/{word}-{word2}",
    "https://x.com/{word}/status/{num}", "https://www.linkedin.com/posts/{word}_{word2}-{num}",
    "https://{word}.com/blog/{word2}", "https://{word}.io/docs/{word2}", "https://{word}.net/{word2}",
    "https://www.amazon.com/{Word}-{Word2}/dp/B0{num8}", "https://apps.apple.com/us/app/{word}/id{num}",
    "https://{word}{num3}.xyz/{word2}", "https://blog.{word}.com/{word2}",
)  # fmt: skip
WORDS = (
    "ledger", "signal", "orbit", "forge", "atlas", "harbor", "summit", "quartz", "ember",
    "nimbus", "vector", "cobalt", "meadow", "pixel", "rocket", "tundra", "willow", "zephyr",
)  # fmt: skip


def rng_for(*parts: str) -> random.Random:
    """A random generator seeded by the parts: the same target always gets the same data."""
    return random.Random(hashlib.sha256("|".join(parts).encode()).digest())


def source_url(rng: random.Random) -> str:
    word, word2 = rng.choice(WORDS), rng.choice(WORDS)
    return rng.choice(SOURCES).format(
        id=uuid.UUID(int=rng.getrandbits(128)).hex[:11], word=word, word2=word2,
        Word=word.title(), Word2=word2.title(), num=rng.randint(10**6, 10**9),
        num8=rng.randint(10**7, 10**8 - 1), num3=rng.randint(100, 999),
    )  # fmt: skip


def envelope(tasks: list[dict[str, Any]], *, code: int = 20000) -> dict[str, Any]:
    cost = sum((Decimal(str(t.get("cost") or 0)) for t in tasks), Decimal(0))
    return {
        "version": "0.1.20250101", "status_code": code, "status_message": MESSAGES.get(code, "Ok."),
        "time": "0.0500 sec.", "cost": float(cost), "tasks_count": len(tasks),
        "tasks_error": sum(1 for t in tasks if t["status_code"] >= 40000), "tasks": tasks,
    }  # fmt: skip


def task_json(
    path: str,
    data: Mapping[str, Any],
    *,
    code: int = 20000,
    cost: Decimal = Decimal(0),
    result: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    api, function = path.split("/")[0], path.split("/")[-2]
    return {
        "id": str(uuid.uuid4()), "status_code": code, "status_message": MESSAGES.get(code, "Error."),
        "time": "0.0400 sec.", "cost": float(cost), "result_count": len(result or []),
        "path": ["v3", *path.split("/")], "data": {"api": api, "function": function, **data},
        "result": result,
    }  # fmt: skip


class FakeDataForSEO(FakeServer):
    def __init__(
        self,
        *,
        login: str = "dfs-login",
        password: str = "dfs-password",
        task_errors: Mapping[str, int] | None = None,
        latency: tuple[float, float] | None = None,
        calls_per_minute: int | None = None,
    ) -> None:
        super().__init__()
        self.calls_per_minute = calls_per_minute
        self._window: deque[float] = deque()
        token = base64.b64encode(f"{login}:{password}".encode()).decode()
        self.expected_auth = f"Basic {token}"
        self.task_errors = dict(task_errors or {})
        self.latency = latency
        self.billed = Decimal(0)
        self._billing = threading.Lock()
        for route, kind in (
            (ROUTE_BACKLINKS, "backlinks"),
            (ROUTE_REFERRING, "referring_domains"),
            (ROUTE_KEYWORDS, "ranked_keywords"),
            (ROUTE_SPAM, "bulk_spam_score"),
        ):
            self.route("POST", route.split(" ", 1)[1], self._handler(kind))  # fmt: skip
        self.route("GET", "/v3/appendix/user_data", self._user_data)
        self.balance = Decimal("42.50")

    def _user_data(self, request: Recorded, _: re.Match[str]) -> Planned:
        """The account's data, free, as DataForSEO answers `appendix/user_data`."""
        if request.header("Authorization") != self.expected_auth:
            return Planned(401, envelope([], code=40100) | {"tasks": None})
        login = base64.b64decode(self.expected_auth.removeprefix("Basic ")).decode().split(":", 1)[0]
        result = {
            "login": login,
            "timezone": "UTC",
            "rates": {"limits": {"minute": {"total": 2000}}},
            "money": {"total": 100.0, "balance": float(self.balance), "limits": {}},
        }
        return Planned(200, envelope([task_json("appendix/user_data/", {}, result=[result])]))

    def _handler(self, kind: str) -> Any:
        def handle(request: Recorded, _: re.Match[str]) -> Planned:
            return self._answer(kind, request)

        return handle

    def _answer(self, kind: str, request: Recorded) -> Planned:
        path = request.path.removeprefix("/v3/")
        if request.header("Authorization") != self.expected_auth:
            return Planned(401, envelope([], code=40100) | {"tasks": None})
        wait = self._over_limit(request.at)
        if wait is not None:
            return Planned(429, {"status_code": 40202, "status_message": MESSAGES[40202]},
                           {"Retry-After": str(max(1, math.ceil(wait)))})  # fmt: skip
        try:
            body = request.json()
        except ValueError:
            return Planned(200, envelope([], code=40503))
        if not isinstance(body, list) or len(body) != 1 or not isinstance(body[0], dict):
            return Planned(200, envelope([], code=40000))
        data = body[0]
        key = str(data.get("target") or ",".join(data.get("targets") or []))
        delay = self._delay(key)
        code = self.task_errors.get(key) or self._invalid(kind, data)
        if code:
            return Planned(200, envelope([task_json(path, data, code=code)]), delay=delay)
        result, items = self._result(kind, data)
        per_task, per_item = PRICES[kind]
        cost = per_task + per_item * items
        with self._billing:
            self.billed += cost
        return Planned(200, envelope([task_json(path, data, cost=cost, result=[result])]),
                       delay=delay)  # fmt: skip

    def _over_limit(self, now: float) -> float | None:
        """Seconds until a slot frees when the per-minute limit is used up, else None (counted)."""
        if self.calls_per_minute is None:
            return None
        with self._billing:
            while self._window and self._window[0] <= now - 60.0:
                self._window.popleft()
            if len(self._window) >= self.calls_per_minute:
                return self._window[0] + 60.0 - now
            self._window.append(now)
            return None

    def _delay(self, key: str) -> float:
        if self.latency is None:
            return 0.0
        low, high = self.latency
        return low + (high - low) * rng_for("latency", key).random()

    def _invalid(self, kind: str, data: Mapping[str, Any]) -> int:
        if kind == "bulk_spam_score":
            targets = data.get("targets")
            return 0 if isinstance(targets, list) and 0 < len(targets) <= 1000 else 40501
        return 0 if data.get("target") else 40501

    def _result(self, kind: str, data: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
        if kind == "bulk_spam_score":
            targets = [str(t) for t in data["targets"]]
            items = [{"target": t, "spam_score": rng_for("spam", t).randint(0, 60)} for t in targets]
            return {"items_count": len(items), "items": items}, len(items)
        target = str(data["target"])
        total = rng_for("total", kind, target).randint(40, 5000)
        count = min(int(data.get("limit") or 100), total, 1000)
        make = {"backlinks": backlink, "referring_domains": referring_domain,
                "ranked_keywords": ranked_keyword}[kind]  # fmt: skip
        items = [make(target, i) for i in range(count)]
        return {"target": target, "total_count": total, "items_count": count, "items": items}, count


def backlink(target: str, index: int) -> dict[str, Any]:
    rng = rng_for("backlink", target, str(index))
    url_from = source_url(rng)
    return {
        "type": "backlink", "domain_from": url_from.split("/")[2], "url_from": url_from,
        "domain_to": target, "url_to": f"https://{target}/{rng.choice(WORDS)}",
        "anchor": rng.choice(WORDS), "dofollow": rng.random() < 0.7,
        "domain_from_rank": rng.randint(0, 1000), "page_from_rank": rng.randint(0, 1000),
        "backlink_spam_score": rng.randint(0, 100), "first_seen": "2024-05-01 10:00:00 +00:00",
        "last_seen": "2025-10-01 10:00:00 +00:00", "is_lost": rng.random() < 0.1,
    }  # fmt: skip


def referring_domain(target: str, index: int) -> dict[str, Any]:
    rng = rng_for("referring", target, str(index))
    return {
        "type": "referring_domain", "domain": source_url(rng).split("/")[2],
        "rank": rng.randint(0, 1000), "backlinks": rng.randint(1, 500),
        "referring_pages": rng.randint(1, 200), "backlinks_spam_score": rng.randint(0, 100),
        "first_seen": "2023-01-15 08:00:00 +00:00",
    }  # fmt: skip


def ranked_keyword(target: str, index: int) -> dict[str, Any]:
    rng = rng_for("keyword", target, str(index))
    keyword = f"{rng.choice(WORDS)} {rng.choice(WORDS)} {rng.choice(('pricing', 'review', 'api', 'login', 'vs'))}"
    return {
        "se_type": "google",
        "keyword_data": {"keyword": keyword, "keyword_info": {
            "search_volume": rng.randint(10, 50000), "cpc": round(rng.uniform(0.1, 12), 2),
            "competition": round(rng.random(), 2)}},
        "ranked_serp_element": {"serp_item": {
            "type": "organic", "rank_group": rng.randint(1, 100), "rank_absolute": rng.randint(1, 120),
            "url": f"https://{target}/{rng.choice(('blog', 'docs', 'pricing', 'product'))}/{index}",
            "etv": round(rng.uniform(0, 900), 2)}},
    }  # fmt: skip
