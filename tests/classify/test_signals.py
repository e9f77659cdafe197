from __future__ import annotations

import pytest

from ingest.classify.signals import content_signals
from tests.fakes.zenrows import CHALLENGE, page_html

pytestmark = pytest.mark.pure


def test_it_reads_title_h1_description_and_counts_visible_words() -> None:
    html = ("<html><head><title> Acme | Durable\nworkflows </title>"
            '<meta name="description" content="Run steps that survive crashes.">'
            "<style>.a{color:red}</style></head><body><h1>Acme <b>workflows</b></h1>"
            "<h1>Second</h1><p>One two three four.</p><script>var x = 1;</script></body></html>")  # fmt: skip

    signals = content_signals(html)

    assert signals.title == "Acme | Durable workflows" and signals.h1 == "Acme workflows"
    assert signals.description == "Run steps that survive crashes."
    assert signals.word_count == 7  # h1 (2), second h1 (1), paragraph (4); no css or script
    assert not (signals.has_pricing or signals.has_login or signals.has_affiliate)


def test_the_fake_sites_pages_carry_the_markers_their_path_suggests() -> None:
    pricing = content_signals(page_html("https://acme.example/pricing"))
    login = content_signals(page_html("https://acme.example/login"))
    review = content_signals(page_html("https://acme.example/blog/best-blenders-review"))

    assert pricing.has_pricing and not pricing.has_login and not pricing.has_affiliate
    assert login.has_login and not login.has_pricing
    assert review.has_affiliate and review.word_count >= 150
    assert pricing.title.endswith("| acme.example") and pricing.h1 and pricing.description


def test_social_profiles_are_found_once_per_network() -> None:
    html = ('<a href="https://www.youtube.com/@acme">YT</a><a href="https://youtube.com/@other">YT2</a>'
            '<a href="https://twitter.com/acmehq/">X</a><a href="https://x.com/acmehq/status/1">tweet</a>'
            '<a href="https://www.linkedin.com/company/acme/">in</a><a href="/about">About</a>')  # fmt: skip

    assert content_signals(html).social_profiles == (
        "https://youtube.com/@acme",
        "https://twitter.com/acmehq",
        "https://linkedin.com/company/acme",
    )


@pytest.mark.parametrize(
    "html",
    ['<a href="https://amzn.to/3xYz">buy</a>', '<a href="https://shop.example/p?ref=jane">x</a>',
     '<a rel="sponsored nofollow" href="https://shop.example/p">x</a>',
     '<a href="https://www.amazon.com/dp/B0?tag=janeblog-20">x</a>',
     "<p>As an Amazon Associate we earn from qualifying purchases.</p>"],
)  # fmt: skip
def test_affiliate_links_and_disclosures_are_detected(html: str) -> None:
    assert content_signals(html).has_affiliate


def test_a_challenge_page_has_no_content_to_speak_of() -> None:
    signals = content_signals(CHALLENGE)

    assert signals.title == "Just a moment..." and signals.word_count == 0
