"""Content signals of a fetched page (url-classify's content stage, stage 3), pure: no IO.

Title, first h1, meta description and visible word count, plus the platform markers that tell
what a site is: a pricing table, a login form, affiliate links; and the social profiles a page links
to (YouTube channels, X, LinkedIn…), which domain onboarding reads as brand properties.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

__all__ = ["ContentSignals", "content_signals"]

_PRICE = re.compile(r"(\$|€|£)\s?\d+([.,]\d{2})?\s*(/|per\s)\s*(mo|month|year|yr|user|seat)", re.I)
_PRICING_WORDS = re.compile(r"\b(pricing|plans?|billed (annually|monthly)|free trial)\b", re.I)
_AFFILIATE_HOSTS = ("amzn.to", "amzn.eu", "shareasale.com", "awin1.com", "go.skimresources.com",
                    "click.linksynergy.com", "impact.com", "partnerstack.com")  # fmt: skip
_AFFILIATE_QUERY = re.compile(r"(^|&)(tag=[\w-]+-2\d|ref=|aff(_id)?=|affiliate(_id)?=|irclickid=)", re.I)
_DISCLOSURE = re.compile(r"as an amazon associate|affiliate (link|commission)|we may earn", re.I)
_SOCIAL = {
    "youtube.com": "youtube", "x.com": "x", "twitter.com": "x", "linkedin.com": "linkedin",
    "facebook.com": "facebook", "instagram.com": "instagram", "tiktok.com": "tiktok",
    "github.com": "github", "discord.gg": "discord", "threads.net": "threads", "bsky.app": "bluesky",
}  # fmt: skip
_PROFILE_PATH = re.compile(r"^/(@[^/]+|channel/[^/]+|c/[^/]+|user/[^/]+|in/[^/]+|company/[^/]+|[\w.-]+)/?$")
_SKIP_TEXT = {"script", "style", "noscript", "template", "svg"}


@dataclass(frozen=True)
class ContentSignals:
    title: str = ""
    h1: str = ""
    description: str = ""
    word_count: int = 0
    has_pricing: bool = False
    has_login: bool = False
    has_affiliate: bool = False
    social_profiles: tuple[str, ...] = field(default=())  # profile URLs, one per network

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["social_profiles"] = list(self.social_profiles)
        return data


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.h1: list[str] = []
        self.description = ""
        self.words = 0
        self.text: list[str] = []
        self.links: list[tuple[str, str]] = []  # (href, rel)
        self.password_input = False
        self._open: list[str] = []
        self._h1_done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "meta" and found.get("name", "").lower() in ("description", "og:description"):
            self.description = self.description or found.get("content", "").strip()
        elif tag == "a" and found.get("href"):
            self.links.append((found["href"], found.get("rel", "").lower()))
        elif tag == "input" and found.get("type", "").lower() == "password":
            self.password_input = True
        if tag not in ("meta", "input", "br", "img", "link", "hr"):
            self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._open:
            while self._open and self._open.pop() != tag:
                pass
        if tag == "h1" and self.h1:
            self._h1_done = True

    def handle_data(self, data: str) -> None:
        if any(tag in _SKIP_TEXT for tag in self._open):
            return
        if "title" in self._open:
            self.title.append(data)
            return
        if "h1" in self._open and not self._h1_done:
            self.h1.append(data)
        self.words += len(data.split())
        if len(self.text) < 2000:
            self.text.append(data)


def _social_profiles(links: list[tuple[str, str]]) -> tuple[str, ...]:
    found: dict[str, str] = {}
    for href, _ in links:
        parts = urlsplit(href)
        host = (parts.hostname or "").removeprefix("www.").removeprefix("m.")
        network = _SOCIAL.get(host)
        if network and network not in found and _PROFILE_PATH.match(parts.path or "/"):
            found[network] = f"https://{host}{parts.path.rstrip('/')}"
    return tuple(found.values())


def _affiliate(links: list[tuple[str, str]], text: str) -> bool:
    for href, rel in links:
        parts = urlsplit(href)
        host = (parts.hostname or "").removeprefix("www.")
        if "sponsored" in rel or host in _AFFILIATE_HOSTS or _AFFILIATE_QUERY.search(parts.query):
            return True
    return _DISCLOSURE.search(text) is not None


def content_signals(html: str) -> ContentSignals:
    reader = _Reader()
    reader.feed(html)
    reader.close()
    text = " ".join(reader.text)
    return ContentSignals(
        title=" ".join("".join(reader.title).split()),
        h1=" ".join("".join(reader.h1).split()),
        description=reader.description,
        word_count=reader.words,
        has_pricing=_PRICE.search(text) is not None or (_PRICING_WORDS.search(text) is not None and "$" in text),
        has_login=reader.password_input,
        has_affiliate=_affiliate(reader.links, text),
        social_profiles=_social_profiles(reader.links),
    )
