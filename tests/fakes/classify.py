"""Fakes for url-classify: a web that native fetches reach through an HTTP proxy, and an
OpenAI-compatible LLM that answers the classification prompt.

`FakeWeb` is the fake ZenRows (same pages, same protected / premium-only / gone hosts) that
also serves absolute-form requests (`GET http://www.acme.com/pricing HTTP/1.1`), as an HTTP
proxy receives them: point `RUNLEDGER_FETCH_PROXY` at it and native fetches of real-looking
http:// URLs land here.

`FakeClassifyLLM` answers url-classify's prompt with labels from the taxonomy chosen by the
words of the URL, and a confidence drawn per URL and round (deterministic); `low` URLs answer
below 70 on every round, `invalid` URLs answer outside the taxonomy. It answers domain-onboard's
keyword-intent prompt too (`intent_answer`). Every usage it reports is kept in `usages` so a test
or bench can price what the fake billed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from tests.fakes.dataforseo import rng_for
from tests.fakes.llm import FakeOpenAI, chat_completion, tokens
from tests.fakes.server import Planned, Recorded
from tests.fakes.zenrows import FakeZenRows

CLASSIFY_MARKER = "You verify the classification of a URL"
INTENT_MARKER = "You classify the search intent of keywords"
INTENTS = ("informational", "navigational", "commercial", "transactional")
HINTS = (
    ("shop", {"domain_type": "commerce", "page_type": "product", "channel_bucket": "marketplace"}),
    ("store", {"domain_type": "commerce", "page_type": "category", "channel_bucket": "marketplace"}),
    ("news", {"domain_type": "news", "page_type": "news_article", "channel_bucket": "news"}),
    ("blog", {"domain_type": "blog", "page_type": "blog_post", "channel_bucket": "search"}),
    ("docs", {"domain_type": "documentation", "page_type": "docs", "channel_bucket": "developer"}),
    ("review", {"domain_type": "review_site", "page_type": "review", "tactic_type": "affiliate"}),
    ("pricing", {"domain_type": "saas", "page_type": "pricing", "channel_bucket": "direct"}),
)


class FakeWeb(FakeZenRows):
    def respond(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> Planned:
        if raw_path.startswith("http://"):
            parts = urlsplit(raw_path)
            raw_path = f"/site/{parts.netloc}{parts.path or '/'}" + (f"?{parts.query}" if parts.query else "")
        return super().respond(method, raw_path, headers, body)


def classify_answer(url: str, round_no: int, *, low: bool) -> dict[str, Any]:
    lowered = url.lower()
    labels: dict[str, Any] = {"domain_type": "corporate", "page_type": "landing", "channel_bucket": "direct"}
    for word, hint in HINTS:
        if word in lowered:
            labels = dict(hint)
            break
    labels.setdefault("tactic_type", "content")
    labels["media_type"] = "text"
    rng = rng_for("llm-confidence", url, str(round_no))
    confidence = rng.randint(50, 68) if low else rng.randint(66, 97)
    return {**labels, "modifiers": ["how_to"] if "how" in lowered else [], "confidence": confidence}


def intent_answer(prompt: dict[str, Any], *, invalid: set[str]) -> dict[str, Any]:
    """domain-onboard's keyword-intent prompt answered: keywords with "api" or "docs" are
    informational, the others an intent drawn per keyword; `invalid` keywords get one outside the four."""
    results = []
    for item in prompt["keywords"]:
        keyword = str(item["keyword"])
        rng = rng_for("llm-intent", keyword)
        if keyword in invalid:
            intent = "curious"
        elif {"api", "docs"} & set(keyword.split()):
            intent = "informational"
        else:
            intent = rng.choice(INTENTS)
        results.append({"id": item["id"], "intent": intent, "confidence": rng.randint(70, 95)})
    return {"results": results}


class FakeClassifyLLM(FakeOpenAI):
    def __init__(self, *, low: Iterable[str] = (), invalid: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.low = set(low)
        self.invalid = set(invalid)
        self.usages: list[dict[str, Any]] = []

    def _chat(self, request: Recorded, match: re.Match[str]) -> Planned:
        body = request.json()
        messages = body.get("messages") or []
        system = "".join(m["content"] for m in messages if m["role"] == "system")
        if not system.startswith((CLASSIFY_MARKER, INTENT_MARKER)):
            return super()._chat(request, match)
        denied = self._denied(request)
        if denied:
            return denied
        user = "\n".join(m["content"] for m in messages if m["role"] == "user")
        facts = json.loads(user)
        if system.startswith(INTENT_MARKER):
            answer: dict[str, Any] = intent_answer(facts, invalid=self.invalid)
        elif facts["url"] in self.invalid:
            answer = {"domain_type": "spaceship", "page_type": "hologram", "confidence": 99}
        else:
            answer = classify_answer(facts["url"], int(facts.get("round", 1)), low=facts["url"] in self.low)
        content = json.dumps(answer)
        with self._lock:
            cached = tokens(system) if system in self._seen_prefixes else 0
            self._seen_prefixes.add(system)
        reply = chat_completion(content, model=body.get("model", "gpt-4o-mini"),
                                prompt_tokens=tokens(system) + tokens(user), completion_tokens=tokens(content),
                                cached_tokens=cached)  # fmt: skip
        with self._lock:
            self.usages.append(reply["usage"])
        return Planned(200, reply)
