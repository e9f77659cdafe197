"""Every rule in rules.json matches each of its example URLs with its own classification."""

from __future__ import annotations

import pytest

from ingest.classify.matcher import rules_classify
from ingest.classify.rules import Example, Rule, load_rules
from ingest.classify.taxonomy import AXES

pytestmark = pytest.mark.pure

CASES = [
    pytest.param(rule, example, id=f"{rule.id}:{example.url}") for rule in load_rules() for example in rule.examples
]


def test_the_rules_file_holds_over_two_hundred_rules_each_with_an_example() -> None:
    rules = load_rules()

    assert len(rules) >= 200
    assert all(rule.examples for rule in rules)
    assert len({rule.id for rule in rules}) == len(rules)


def test_the_rules_cover_the_platforms_the_seed_names() -> None:
    hosts = {host for rule in load_rules() for host in rule.hosts}

    for platform in ("youtube.com", "github.com", "medium.com", "amazon.com", "reddit.com",
                     "apps.apple.com", "play.google.com", "nytimes.com", "readthedocs.io",
                     "linkedin.com", "x.com"):  # fmt: skip
        assert platform in hosts


@pytest.mark.parametrize(("rule", "example"), CASES)
def test_each_rule_classifies_its_examples(rule: Rule, example: Example) -> None:
    result = rules_classify(example.url)

    assert rule.id in result.rules
    expected = dict(example.expect) or dict(rule.sets)
    for axis, value in expected.items():
        if axis in AXES:
            assert getattr(result, axis) == value, (
                f"{axis} of {example.url}: {getattr(result, axis)!r}, decided by {result.rules}"
            )
    assert set(rule.modifiers) <= set(result.modifiers)
