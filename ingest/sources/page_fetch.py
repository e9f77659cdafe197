"""Fetched pages and the cascade's decisions, pure: is this answer a block, what to try next.

The URL classifier's content stage fetches a page the cheapest way that works:
a native fetch (free), then ZenRows with JS rendering (basic, ~$0.001), then ZenRows with a
residential proxy (premium, ~$0.01). It escalates only when the cheaper answer was blocked
(403/429, a captcha or bot-challenge page, a page that needs JavaScript) or failed; a page
that does not exist (404/410) is not worth paying for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["CASCADE", "FetchMethod", "FetchResult", "blocked_reason", "next_method"]

FetchMethod = Literal["native", "zenrows_basic", "zenrows_premium"]
CASCADE: tuple[FetchMethod, ...] = ("native", "zenrows_basic", "zenrows_premium")
GONE = frozenset({404, 410})

# Bot-challenge pages: their titles and the scripts of the common anti-bot vendors. Words like
# "captcha" alone are not enough (a login page may embed reCAPTCHA and still be the page).
_CHALLENGE_TITLE = re.compile(
    r"<title[^>]*>\s*(just a moment|attention required|access denied|are you a robot|"
    r"security check|verify you are human|pardon our interruption|captcha|robot check|"
    r"request blocked|you have been blocked)",
    re.IGNORECASE,
)
_CHALLENGE_MARKERS = (
    "cf-chl-", "/cdn-cgi/challenge-platform/", "px-captcha", "_incapsula_resource",
    "captcha-delivery.com", "geo.captcha-delivery", "distil_r_captcha", "/_sec/cp_challenge/",
    "awswaf", "hcaptcha.com/1/api.js?onload=challenge",
)  # fmt: skip
_NEEDS_JS = re.compile(
    r"(please )?(enable|turn on) javascript|javascript is (required|disabled)|"
    r"you need to enable javascript to run this app",
    re.IGNORECASE,
)
_TAG = re.compile(r"<script\b.*?</script>|<style\b.*?</style>|<[^>]+>", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class FetchResult:
    """One attempt at a page. `blocked` names why it does not count ("captcha", "forbidden"…)."""

    url: str
    method: FetchMethod
    status: int  # 0 when no HTTP answer came (network error)
    html: str = ""
    final_url: str = ""
    blocked: str | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.blocked is None and 200 <= self.status < 400


def visible_text_length(html: str) -> int:
    return len(" ".join(_TAG.sub(" ", html).split()))


def blocked_reason(status: int, html: str, headers: Mapping[str, str] | None = None) -> str | None:
    """Why a native answer is a block rather than the page, or None when it is the page."""
    lowered = {k.lower(): v.lower() for k, v in (headers or {}).items()}
    head = html[:50_000]
    challenge = (
        lowered.get("cf-mitigated") == "challenge"
        or _CHALLENGE_TITLE.search(head) is not None
        or any(marker in head for marker in _CHALLENGE_MARKERS)
    )
    if status == 429:
        return "rate_limited"
    if challenge:
        return "captcha"
    if status in (401, 403, 407, 451):
        return "forbidden"
    if status == 200 and visible_text_length(head) < 400 and _NEEDS_JS.search(head):
        return "needs_javascript"
    return None


def next_method(result: FetchResult) -> FetchMethod | None:
    """The method to try after `result`, or None when the cascade stops (done, gone, or spent)."""
    if result.ok or (result.blocked is None and result.status in GONE):
        return None
    index = CASCADE.index(result.method)
    return CASCADE[index + 1] if index + 1 < len(CASCADE) else None
