"""The demo's RankDisco: a few domains onboarded offline, against answers in DataForSEO's and
the web's own wire formats.

`DemoWeb` is a `requests` transport that answers what `domain-onboard` asks: DataForSEO's four
live endpoints (a JSON envelope with per-task status codes and costs, deterministic data per
target) and the domains' pages (HTML linking to a YouTube channel and social profiles). The
demo installs clients that speak through it, so the real clients parse real answers and the
costs recorded are the ones the answers report. One demo domain's keyword task fails inside a
200 (40501), so the demo shows a failed branch and a run ending completed_with_errors.
"""

from __future__ import annotations

import hashlib
import json
import random
import uuid
from decimal import Decimal
from typing import Any

import requests
from requests.adapters import BaseAdapter

from ingest.rankdisco.answer_cache import TenantAnswerCache
from ingest.sources.dataforseo import DataForSEOClient
from ingest.sources.http import RateLimiter
from ingest.sources.outbound import InProcess
from ingest.sources.zenrows import NativeFetcher
from ingest.workflows.domain_onboard import OnboardClients, clients_install, domain_onboard_start
from ingest.workflows.domain_onboard.workflow import dataforseo_budget_ensure

DOMAINS = {"acme": ["acme-logistics.example", "northwind.example"], "globex": ["globex.example", "hooli.example"]}
FAILING_KEYWORDS = "hooli.example"  # its ranked_keywords task fails: a fallback branch in the demo
DEMO_LIMIT = 40
WORDS = ("ledger", "signal", "orbit", "forge", "atlas", "harbor", "summit", "quartz", "ember", "nimbus", "vector")
SOURCES = (
    "https://www.youtube.com/watch?v={id}",
    "https://github.com/{w}/{w2}",
    "https://medium.com/@{w}/{w2}",
    "https://www.reddit.com/r/{w}/comments/{id}/{w2}/",
    "https://{w}.substack.com/p/{w2}",
    "https://techcrunch.com/2025/02/11/{w}-{w2}/",
    "https://dev.to/{w}/{w2}",
    "https://{w}.io/docs/{w2}",
    "https://www.amazon.com/{w}/dp/B0{id}",
    "https://blog.{w}.com/{w2}",
)
PRICES = {
    "backlinks": (Decimal("0.02"), Decimal("0.00003")),
    "referring_domains": (Decimal("0.02"), Decimal("0.00003")),
    "ranked_keywords": (Decimal("0.01"), Decimal("0.0001")),
    "bulk_spam_score": (Decimal(0), Decimal("0.00002")),
}


def _rng(*parts: str) -> random.Random:
    return random.Random(hashlib.sha256("|".join(parts).encode()).digest())


def _source(rng: random.Random) -> str:
    return rng.choice(SOURCES).format(id=rng.randint(10**6, 10**8), w=rng.choice(WORDS), w2=rng.choice(WORDS))


def _items(kind: str, data: dict[str, Any]) -> list[dict[str, Any]]:
    if kind == "bulk_spam_score":
        return [{"target": t, "spam_score": _rng("spam", t).randint(0, 60)} for t in data["targets"]]
    target, limit = str(data["target"]), int(data.get("limit") or 100)
    items = []
    for i in range(limit):
        rng = _rng(kind, target, str(i))
        if kind == "backlinks":
            url = _source(rng)
            items.append(
                {
                    "url_from": url,
                    "url_to": f"https://{target}/{rng.choice(WORDS)}",
                    "domain_from": url.split("/")[2],
                    "anchor": rng.choice(WORDS),
                    "dofollow": rng.random() < 0.7,
                    "domain_from_rank": rng.randint(0, 1000),
                    "backlink_spam_score": rng.randint(0, 100),
                }
            )
        elif kind == "referring_domains":
            items.append(
                {
                    "domain": _source(rng).split("/")[2],
                    "rank": rng.randint(0, 1000),
                    "backlinks": rng.randint(1, 400),
                    "referring_pages": rng.randint(1, 100),
                }
            )
        else:
            items.append(
                {
                    "keyword_data": {
                        "keyword": f"{rng.choice(WORDS)} {rng.choice(WORDS)} {i}",
                        "keyword_info": {"search_volume": rng.randint(10, 40000)},
                    },
                    "ranked_serp_element": {
                        "serp_item": {
                            "type": "organic",
                            "rank_group": rng.randint(1, 50),
                            "url": f"https://{target}/{rng.choice(WORDS)}/{i}",
                        }
                    },
                }
            )
    return items


class DemoWeb(BaseAdapter):
    """Answers DataForSEO's live endpoints and the demo domains' pages, offline."""

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        url = str(request.url)
        if "/v3/" in url:
            raw = request.body if isinstance(request.body, str | bytes) else b"[]"
            body = json.loads(raw or b"[]")
            return self._answer(request, 200, self._task(url.split("/v3/", 1)[1], body[0]), "application/json")
        host = url.split("/")[2]
        brand = host.split(".")[0]
        html = (
            f"<html><head><title>{host}</title></head><body><h1>{host}</h1><p>{' '.join(WORDS)}</p>"
            f'<a href="https://www.youtube.com/@{brand}">YouTube</a><a href="https://x.com/{brand}">X</a>'
            f'<a href="https://www.linkedin.com/company/{brand}">LinkedIn</a></body></html>'
        )
        return self._answer(request, 200, html, "text/html; charset=utf-8")

    def _task(self, path: str, data: dict[str, Any]) -> str:
        kind = path.split("/")[-2]
        task: dict[str, Any] = {
            "id": str(uuid.uuid4()),
            "status_code": 20000,
            "status_message": "Ok.",
            "path": ["v3", *path.split("/")],
            "data": data,
        }
        if kind == "ranked_keywords" and data.get("target") == FAILING_KEYWORDS:
            task |= {"status_code": 40501, "status_message": "Invalid Field.", "cost": 0, "result": None}
        else:
            items = _items(kind, data)
            per_task, per_item = PRICES[kind]
            task |= {
                "cost": float(per_task + per_item * len(items)),
                "result": [
                    {
                        "target": data.get("target"),
                        "total_count": len(items) * 7,
                        "items_count": len(items),
                        "items": items,
                    }
                ],
            }
        return json.dumps({"status_code": 20000, "status_message": "Ok.", "cost": task["cost"], "tasks": [task]})

    def _answer(self, request: requests.PreparedRequest, status: int, text: str, kind: str) -> requests.Response:
        response = requests.Response()
        response.status_code, response.url, response.request = status, str(request.url), request
        response.headers["Content-Type"] = kind
        response._content = text.encode()
        response.encoding = "utf-8"
        return response

    def close(self) -> None:
        return None


def demo_clients() -> OnboardClients:
    session = requests.Session()
    session.mount("https://", DemoWeb())
    return OnboardClients(
        dataforseo=DataForSEOClient(
            login="demo",
            password="demo",
            session=session,
            cache=TenantAnswerCache(),
            limiter=InProcess(RateLimiter(2000, 60.0)),
        ),
        native=NativeFetcher(session=session),
    )


def demo_onboard() -> tuple[int, int]:
    """Install the offline clients and onboard the demo domains; (started, already there)."""
    clients_install(demo_clients)
    dataforseo_budget_ensure(actor="demo")
    started = already = 0
    for tenant, names in DOMAINS.items():
        for name in names:
            _, created = domain_onboard_start(
                tenant,
                name,
                actor="demo",
                backlink_limit=DEMO_LIMIT,
                keyword_limit=DEMO_LIMIT,
                referring_domains_limit=DEMO_LIMIT,
            )
            started, already = started + created, already + (not created)
    return started, already
