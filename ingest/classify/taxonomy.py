"""The URL classification taxonomy and its thresholds.

A ClassificationResult has five type axes and free modifiers. Each axis starts from a few
examples (domain types "platform, commerce", page types "article, product", tactic types "seo, paid",
channel buckets "search, social", media types "video, podcast"); the values below complete
those lists for the URLs a backlink and ranking profile holds. Every stage (rules, similarity,
content, LLM) answers within them, and the LLM stage gets them as its constraints.
"""

from __future__ import annotations

from typing import Final

# Confidence thresholds (percent).
PIPELINE_MIN_CONFIDENCE: Final = 70  # a stage at or above it ends the pipeline early
LLM_VERIFICATION_THRESHOLD: Final = 65  # below it the LLM verifies
CACHE_MIN_CONFIDENCE: Final = 60  # a cached domain classification at or above it is reused
HIGH_CONFIDENCE: Final = 85  # at or above it the result feeds the similarity index

DOMAIN_TYPES: Final = frozenset({
    "platform",  # a general platform hosting others' content (Notion sites, link-in-bio)
    "social", "community", "video", "podcast", "code", "package_registry",
    "commerce", "marketplace", "app_store",
    "news", "publisher", "blog", "newsletter", "press_wire",
    "documentation", "reference", "education", "research",
    "saas", "corporate", "personal",
    "review_site", "directory", "job_board", "events",
    "search_engine", "link_shortener", "hosting", "image_hosting", "file_sharing",
    "government", "nonprofit",
})  # fmt: skip

PAGE_TYPES: Final = frozenset({
    "homepage", "article", "blog_post", "news_article", "press_release", "listing",
    "product", "category", "search_results", "cart", "checkout",
    "pricing", "login", "signup", "demo", "landing",
    "docs", "api_reference", "help_article", "changelog", "status",
    "profile", "channel", "community", "post", "thread", "question",
    "video", "playlist", "podcast", "podcast_episode", "audio", "image",
    "repository", "code_file", "issue", "pull_request", "release", "package",
    "app_listing", "review", "comparison", "case_study", "integration",
    "about", "contact", "careers", "job_posting", "legal", "tag", "author", "archive",
    "download", "document", "event", "course", "feed", "wiki_page",
})  # fmt: skip

TACTIC_TYPES: Final = frozenset({
    "seo", "paid", "social", "pr", "community", "content", "affiliate", "ugc",
    "directory_listing", "review", "developer_relations", "partnership", "email", "commerce",
})  # fmt: skip

CHANNEL_BUCKETS: Final = frozenset({
    "search", "social", "video", "audio", "community", "news", "referral", "marketplace",
    "app_store", "developer", "email", "direct", "paid",
})  # fmt: skip

MEDIA_TYPES: Final = frozenset({
    "text", "video", "audio", "image", "code", "document", "app", "interactive",
})  # fmt: skip

MODIFIERS: Final = frozenset({
    "ugc", "official", "sponsored", "affiliate", "tracking_params", "paid_click",
    "paginated", "localized", "mobile", "amp", "short_video", "live", "file",
    "user_profile", "company_page", "open_source", "subdomain_site", "link_in_bio",
    "short_link", "dated", "listicle", "how_to", "tutorial", "comparison", "question",
    "auth_wall", "paywall", "archived", "job", "newsletter", "wiki", "forum", "download",
    "marketplace_listing", "review", "press", "government", "academic", "search",
})  # fmt: skip

AXES: Final = {
    "domain_type": DOMAIN_TYPES,
    "page_type": PAGE_TYPES,
    "tactic_type": TACTIC_TYPES,
    "channel_bucket": CHANNEL_BUCKETS,
    "media_type": MEDIA_TYPES,
}
