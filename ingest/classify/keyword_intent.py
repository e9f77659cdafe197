"""The search intent of a ranked keyword: informational, navigational, commercial or
transactional, the four intents SEO tools tag keywords with. Pure: no IO.

Rules first, free: words that say what the searcher wants ("buy", "price", "near me" →
transactional; "best", "review", "vs" → commercial; the domain's own brand, "login" →
navigational; "how", "what", "guide" → informational). A keyword whose words point one way is
decided by them; one whose words point several ways, or nowhere, is left to the LLM, which is
asked about a batch of them at once (`intent_messages`, `intent_answers`). Until it answers, an
undecided keyword keeps the rules' best guess at a confidence below `RULES_MIN_CONFIDENCE`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ingest.sources.llm import ChatMessage

__all__ = [
    "INTENTS",
    "LLM_BATCH",
    "RULES_MIN_CONFIDENCE",
    "IntentGuess",
    "domain_brand",
    "intent_answers",
    "intent_max_tokens",
    "intent_messages",
    "intent_rules",
]

INTENTS = ("informational", "navigational", "commercial", "transactional")
RULES_MIN_CONFIDENCE = 70  # the pipeline's early-exit threshold: below it the LLM decides
LLM_BATCH = 50  # keywords per LLM call: one prompt's overhead shared, one answer well under its token cap

# Word sequences per intent, matched on whole words of the lower-cased keyword.
SIGNALS: dict[str, tuple[str, ...]] = {
    "transactional": (
        "buy",
        "order",
        "purchase",
        "price",
        "prices",
        "pricing",
        "cost",
        "costs",
        "cheap",
        "cheapest",
        "coupon",
        "coupons",
        "discount",
        "discounts",
        "deal",
        "deals",
        "promo",
        "promo code",
        "for sale",
        "near me",
        "shop",
        "free trial",
        "trial",
        "subscribe",
        "subscription",
        "download",
        "book",
        "booking",
        "hire",
        "rent",
        "quote",
        "sign up",
        "signup",
    ),
    "commercial": (
        "best",
        "top",
        "review",
        "reviews",
        "vs",
        "versus",
        "compare",
        "comparison",
        "alternative",
        "alternatives",
        "competitors",
        "pros and cons",
        "rating",
        "ratings",
        "ranked",
        "recommended",
    ),
    "navigational": (
        "login",
        "log in",
        "sign in",
        "signin",
        "account",
        "official site",
        "official website",
        "website",
        "homepage",
        "customer service",
        "support",
        "contact",
        "dashboard",
        "portal",
    ),
    "informational": (
        "how",
        "what",
        "why",
        "when",
        "where",
        "who",
        "guide",
        "tutorial",
        "tips",
        "ideas",
        "examples",
        "example",
        "meaning",
        "definition",
        "define",
        "learn",
        "explained",
        "history",
        "is it",
        "does",
        "can i",
        "ways to",
        "checklist",
        "template",
    ),
}
# Brands searched by name whatever the domain: a keyword naming one is a search for its site.
KNOWN_BRANDS = frozenset(
    (
        "google",
        "youtube",
        "facebook",
        "instagram",
        "amazon",
        "wikipedia",
        "twitter",
        "linkedin",
        "reddit",
        "netflix",
        "tiktok",
        "ebay",
        "gmail",
        "github",
        "pinterest",
        "spotify",
    )
)
# When the words point several ways, the guess the LLM is shown (the most specific intent first).
PRECEDENCE = ("transactional", "commercial", "navigational", "informational")
_WORD = re.compile(r"[a-z0-9]+")
_SECOND_LEVEL = {"co", "com", "org", "net", "ac", "gov", "edu"}


@dataclass(frozen=True)
class IntentGuess:
    """What the rules make of a keyword: `intent` "" when no word says anything."""

    intent: str
    confidence: int
    rule: str

    @property
    def decided(self) -> bool:
        return bool(self.intent) and self.confidence >= RULES_MIN_CONFIDENCE


def domain_brand(domain: str) -> str:
    """`acme.example` → `acme`, `shop.acme.co.uk` → `acme`: the label a brand search names."""
    labels = domain.lower().removeprefix("www.").split(".")
    if len(labels) >= 3 and labels[-2] in _SECOND_LEVEL and len(labels[-1]) == 2:
        return labels[-3]
    return labels[-2] if len(labels) >= 2 else labels[0]


# One set lookup a word for the single words, a substring search for the phrases.
_SINGLE = {intent: frozenset(p for p in phrases if " " not in p) for intent, phrases in SIGNALS.items()}
_PHRASES = {intent: tuple(f" {p} " for p in phrases if " " in p) for intent, phrases in SIGNALS.items()}


def _signal(intent: str, words: Sequence[str], spaced: str) -> str | None:
    single = _SINGLE[intent]
    hit = next((w for w in words if w in single), None)
    return hit or next((p.strip() for p in _PHRASES[intent] if p in spaced), None)


def intent_rules(keyword: str, *, brand: str = "") -> IntentGuess:
    """The keyword's intent by its words; decided (>= RULES_MIN_CONFIDENCE) when they all point one way."""
    words = _WORD.findall(keyword.lower())
    found: dict[str, str] = {}
    compact = "".join(words)
    if brand and len(brand) >= 3 and (brand in words or (len(brand) >= 4 and brand in compact)):
        found["navigational"] = f"brand:{brand}"
    elif known := next((w for w in words if w in KNOWN_BRANDS), ""):
        found["navigational"] = f"brand:{known}"
    spaced = f" {' '.join(words)} "
    for intent in SIGNALS:
        hit = _signal(intent, words, spaced)
        if hit and intent not in found:
            found[intent] = hit
    if not found:
        return IntentGuess("", 0, "")
    if len(found) == 1:
        intent, rule = next(iter(found.items()))
        return IntentGuess(intent, 90 if rule.startswith("brand:") else 85, rule)
    guess = next(i for i in PRECEDENCE if i in found)
    return IntentGuess(guess, 50, "+".join(f"{i}:{found[i]}" for i in PRECEDENCE if i in found))


SYSTEM_PROMPT = (
    "You classify the search intent of keywords a website ranks for on Google, for an SEO analysis. "
    "Intents: informational (the searcher wants to learn something), navigational (wants a particular "
    "site or page), commercial (researches products or services before buying: best, reviews, "
    "comparisons), transactional (wants to buy, sign up or act now). Answer with one JSON object "
    '{"results": [{"id": <the keyword\'s id>, "intent": <one of informational, navigational, '
    'commercial, transactional>, "confidence": <0-100>}]}, one entry per keyword, nothing else.'
)


def intent_messages(
    keywords: Sequence[str], *, domain: str, guesses: Sequence[IntentGuess] | None = None
) -> list[ChatMessage]:
    """The prompt for one batch: the keywords by id, with the rules' guess where they had one."""
    items: list[dict[str, Any]] = []
    for i, keyword in enumerate(keywords):
        item: dict[str, Any] = {"id": i, "keyword": keyword}
        if guesses is not None and guesses[i].intent:
            item["rules_guess"] = guesses[i].intent
        items.append(item)
    return [
        ChatMessage(role="system", content=SYSTEM_PROMPT),
        ChatMessage(role="user", content=json.dumps({"domain": domain, "keywords": items}, sort_keys=True)),
    ]


def intent_max_tokens(count: int) -> int:
    """Output tokens an answer for `count` keywords needs at most (~25 an entry)."""
    return 40 + 25 * count


def intent_answers(data: Mapping[str, Any], *, count: int) -> dict[int, tuple[str, int]]:
    """The model's answer as {keyword id: (intent, confidence)}; entries outside the four intents,
    or naming no keyword of the batch, are dropped (those keywords stay with the rules' guess)."""
    results = data.get("results")
    verdicts: dict[int, tuple[str, int]] = {}
    for entry in results if isinstance(results, list) else []:
        if not isinstance(entry, Mapping):
            continue
        intent = str(entry.get("intent") or "").strip().lower()
        try:
            key = int(entry.get("id"))  # type: ignore[arg-type]
            confidence = max(0, min(100, round(float(entry.get("confidence", 0)))))
        except (TypeError, ValueError):
            continue
        if intent in INTENTS and 0 <= key < count:
            verdicts[key] = (intent, confidence)
    return verdicts
