"""How stage proposals combine, the neighbours' vote, the content heuristics and the reading
of the LLM's answer (pure)."""

from __future__ import annotations

import pytest

from ingest.classify.llm_verify import SYSTEM_PROMPT, LLMAnswerInvalid, llm_answer, llm_messages
from ingest.classify.result import (
    Candidate,
    Neighbour,
    combine,
    content_candidate,
    similarity_candidate,
)
from ingest.classify.signals import ContentSignals
from ingest.classify.taxonomy import AXES


def test_the_stronger_proposal_wins_its_axes_and_the_weaker_fills_the_rest() -> None:
    rules = Candidate(40, {"page_type": "pricing", "tactic_type": "content"}, ("paginated",))
    content = Candidate(75, {"page_type": "login", "domain_type": "saas"}, ("auth_wall",))
    merged = combine(rules, content)
    assert merged == Candidate(75, {"page_type": "login", "tactic_type": "content", "domain_type": "saas"},
                               ("auth_wall", "paginated"))  # fmt: skip
    assert combine(None, rules) == rules and combine(rules, None) == rules


def test_neighbours_that_agree_give_about_their_score_and_a_split_vote_less() -> None:
    agree = [Neighbour(f"u{i}", 0.9, {"domain_type": "code", "page_type": "repository"}) for i in range(3)]
    assert similarity_candidate(agree) == Candidate(90, {"domain_type": "code", "page_type": "repository"}, ())
    split = [Neighbour("a", 0.9, {"domain_type": "code"}), Neighbour("b", 0.85, {"domain_type": "blog"}),
             Neighbour("c", 0.8, {"domain_type": "blog"})]  # fmt: skip
    voted = similarity_candidate(split)
    assert voted is not None and voted.get("domain_type") == "blog" and voted.confidence == round(85 * 1.65 / 2.55)
    assert similarity_candidate([Neighbour("a", 0.3, {"domain_type": "code"})]) is None  # under 50: noise
    assert similarity_candidate([]) is None


@pytest.mark.parametrize(("signals", "page", "domain", "confidence"), [
    (ContentSignals(has_login=True, word_count=40), "login", "saas", 80),
    (ContentSignals(has_pricing=True, word_count=300), "pricing", "saas", 80),
    (ContentSignals(has_affiliate=True, word_count=900), "review", "review_site", 72),
    (ContentSignals(word_count=900), "article", "blog", 68),
    (ContentSignals(word_count=100), "landing", None, 28),
])  # fmt: skip
def test_the_page_itself_proposes_page_and_domain_types(signals: ContentSignals, page: str, domain: str | None,
                                                         confidence: int) -> None:  # fmt: skip
    proposed = content_candidate(signals, None)
    assert (proposed.get("page_type"), proposed.get("domain_type"), proposed.confidence) == (page, domain, confidence)


def test_content_keeps_the_prior_domain_when_the_page_says_nothing_of_it() -> None:
    prior = Candidate(60, {"domain_type": "news", "page_type": "news_article"})
    proposed = content_candidate(ContentSignals(word_count=700), prior)
    assert (proposed.get("domain_type"), proposed.get("page_type"), proposed.confidence) == ("news", "news_article", 68)


def test_the_prompt_lists_every_value_of_the_taxonomy_and_the_page_signals() -> None:
    for axis, values in AXES.items():
        assert all(value in SYSTEM_PROMPT for value in values), axis
    messages = llm_messages(
        "https://x.example/a",
        partial=Candidate(50, {"page_type": "article"}),
        signals={"title": "Hello", "word_count": 10, "social_profiles": []},
        round_no=2,
    )
    assert '"round": 2' in messages[1]["content"] and '"title": "Hello"' in messages[1]["content"]
    assert "social_profiles" not in messages[1]["content"]


def test_the_llm_answer_keeps_only_taxonomy_values() -> None:
    answer = llm_answer({"domain_type": "saas", "page_type": "hologram", "media_type": "text",
                         "modifiers": ["official", "glitter"], "confidence": 120})  # fmt: skip
    assert answer == Candidate(100, {"domain_type": "saas", "media_type": "text"}, ("official",))
    with pytest.raises(LLMAnswerInvalid, match="no domain_type or page_type"):
        llm_answer({"domain_type": "spaceship", "confidence": 90})
    assert llm_answer({"page_type": "docs", "confidence": "n/a"}).confidence == 0
