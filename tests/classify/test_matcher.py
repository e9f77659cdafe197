from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ingest.classify.matcher import RulesMatcher, rules_classify, split_url
from ingest.classify.rules import RulesInvalid, load_rules, parse_rules

pytestmark = pytest.mark.pure


def rule(**fields: Any) -> dict[str, Any]:
    return {"examples": ["https://a.example/"], "confidence": 80, **fields}


def matcher(*rules: dict[str, Any]) -> RulesMatcher:
    return RulesMatcher(parse_rules({"rules": list(rules)}))


def test_a_platform_and_its_page_type_give_a_confident_full_classification() -> None:
    result = rules_classify("https://www.youtube.com/watch?v=dQw4w9WgXcQ")

    assert (result.domain_type, result.page_type, result.media_type, result.channel_bucket) == (
        "video",
        "video",
        "video",
        "video",
    )
    assert result.confidence >= 90 and not result.needs_vectorize
    assert result.rule == "youtube-watch" and result.rules[0] == "youtube-watch"
    assert "youtube" in result.rules


def test_a_platform_path_rule_beats_a_generic_path_rule() -> None:
    result = rules_classify("https://github.com/acme/pricing")

    assert result.page_type == "repository" and "path-pricing" in result.rules


def test_a_generic_page_type_fills_in_under_a_known_platform() -> None:
    result = rules_classify("https://github.com/pricing")

    assert (result.domain_type, result.page_type, result.rule) == ("code", "pricing", "path-pricing")


def test_the_rule_naming_more_of_the_host_wins_a_tie() -> None:
    result = rules_classify("https://docs.google.com/document/d/1AbC/edit")

    assert result.domain_type == "file_sharing"  # docs.google.com's rule, not google.com's
    assert result.page_type == "document"


def test_a_page_type_without_a_domain_type_stays_below_the_early_exit() -> None:
    result = rules_classify("https://unknown-company.example/pricing")

    assert result.page_type == "pricing" and result.domain_type is None
    assert result.confidence < 70 and result.needs_vectorize


def test_a_url_no_rule_matches_is_empty_with_zero_confidence() -> None:
    result = rules_classify("https://unknown-company.example/x7/q9")

    assert result.rules == () and result.rule is None and result.confidence == 0
    assert (result.domain_type, result.page_type, result.modifiers) == (None, None, ())
    assert result.needs_vectorize


def test_modifiers_from_every_matching_rule_are_kept() -> None:
    result = rules_classify("https://www.amazon.com/dp/0132350882?tag=janeblog-20&utm_source=blog")

    assert {"affiliate", "marketplace_listing", "tracking_params"} <= set(result.modifiers)
    assert result.tactic_type == "affiliate" and result.page_type == "product"


def test_paid_click_ids_mark_paid_traffic() -> None:
    result = rules_classify("https://acme.example/lp/spring?gclid=abc&utm_medium=cpc")

    assert (result.tactic_type, result.channel_bucket, result.page_type) == ("paid", "paid", "landing")
    assert "paid_click" in result.modifiers


def test_explicit_priority_and_file_order_decide_between_generic_rules() -> None:
    m = matcher(
        rule(id="first", path="^/x", set={"page_type": "docs"}),
        rule(id="second", path="^/x", set={"page_type": "pricing"}),
        rule(id="strong", path="^/x/y", set={"page_type": "login"}, priority=200),
    )

    assert m.classify("https://a.example/x").page_type == "docs"
    assert m.classify("https://a.example/x/y").page_type == "login"
    assert [r.id for r in m.matching("https://a.example/x/y")] == ["strong", "first", "second"]


def test_a_host_rule_matches_subdomains_but_not_lookalike_domains() -> None:
    m = matcher(rule(id="gh", hosts=["github.com"], set={"domain_type": "code"}))

    assert m.classify("https://api.github.com/repos").domain_type == "code"
    assert m.classify("https://notgithub.com/").domain_type is None
    assert m.classify("https://github.com.evil.example/").domain_type is None


def test_urls_are_normalised_before_matching() -> None:
    assert split_url("HTTPS://WWW.YouTube.com:443/Watch?V=1") == ("youtube.com", "/watch", "v=1")
    assert split_url("example.com/Blog/Post") == ("example.com", "/blog/post", "")
    assert split_url("https://example.com") == ("example.com", "/", "")


def test_as_dict_gives_the_seed_fields() -> None:
    data = rules_classify("https://medium.com/@janedoe/why-durable-workflows-matter-1a2b3c4d5e6f").as_dict()

    assert set(data) >= {"confidence", "domain_type", "page_type", "tactic_type", "channel_bucket",
                         "media_type", "modifiers", "rule", "rules", "needs_vectorize"}  # fmt: skip
    assert data["page_type"] == "blog_post" and isinstance(data["modifiers"], list)


@pytest.mark.parametrize(
    ("bad", "message"),
    [({"rules": [rule(id="a", path="^/(", set={"page_type": "docs"})]}, "not a valid regex"),
     ({"rules": [rule(id="a", path="^/", set={"page_type": "webpage"})]}, "'webpage' is not in the taxonomy"),
     ({"rules": [rule(id="a", path="^/", set={"colour": "red"})]}, "sets 'colour'"),
     ({"rules": [rule(id="a", path="^/", modifiers=["shiny"])]}, "modifiers \\['shiny'\\]"),
     ({"rules": [rule(id="a", set={"page_type": "docs"})]}, "no condition"),
     ({"rules": [rule(id="a", path="^/", set={"page_type": "docs"}, examples=[])]}, "no example"),
     ({"rules": [rule(id="a", path="^/", set={"page_type": "docs"}, wat=1)]}, "unknown keys"),
     ({"rules": [rule(id="a", path="^/", set={"page_type": "docs"}),
                 rule(id="a", path="^/b", set={"page_type": "docs"})]}, "used twice"),
     ([], "JSON object")],
)  # fmt: skip
def test_an_invalid_rules_file_is_refused_with_the_reason(bad: Any, message: str) -> None:
    with pytest.raises(RulesInvalid, match=message):
        parse_rules(bad)


def test_load_rules_reads_a_given_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": [rule(id="only", path="^/", set={"page_type": "docs"})]}))

    assert [r.id for r in load_rules(path)] == ["only"]


def test_a_subdomain_pattern_needs_a_domain_after_it() -> None:
    assert rules_classify("https://dev.to/janedoe/my-first-post-3k2j").domain_type == "blog"
    assert rules_classify("https://dev.acme.example/guide").domain_type == "documentation"
    assert rules_classify("https://blog.acme.example/launch-week").page_type == "blog_post"
