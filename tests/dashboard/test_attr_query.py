"""The search-attribute grammar (dashboard/attr_query.py), the one parser of the console's list, the
REST list and `runledger list --attr`: each form it reads, and each bad expression named."""

from __future__ import annotations

import pytest

from dashboard.attr_query import AttrTerm, parse_attr_query, parse_term

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "term"),
    [
        ("customer:acme", AttrTerm(key="customer", values=("acme",), text="customer:acme")),
        ("customer:acme|globex", AttrTerm(key="customer", values=("acme", "globex"), text="customer:acme|globex")),
        ("amount>=100", AttrTerm(key="amount", low=100.0, text="amount>=100")),
        ("amount>100", AttrTerm(key="amount", low=100.0, low_open=True, text="amount>100")),
        ("amount<=0.5", AttrTerm(key="amount", high=0.5, text="amount<=0.5")),
        ("amount<-3", AttrTerm(key="amount", high=-3.0, high_open=True, text="amount<-3")),
        ("amount:10..50", AttrTerm(key="amount", low=10.0, high=50.0, text="amount:10..50")),
        ("amount:10..", AttrTerm(key="amount", low=10.0, text="amount:10..")),
        ("amount:..50", AttrTerm(key="amount", high=50.0, text="amount:..50")),
        ("!region:eu", AttrTerm(key="region", values=("eu",), negate=True, text="!region:eu")),
        ("!amount>=100", AttrTerm(key="amount", low=100.0, negate=True, text="!amount>=100")),
        # Not a range of numbers: an ordinary value with dots in it.
        ("version:1.2..beta", AttrTerm(key="version", values=("1.2..beta",), text="version:1.2..beta")),
        (
            "url:https://a.example/x",
            AttrTerm(key="url", values=("https://a.example/x",), text="url:https://a.example/x"),
        ),
    ],
)
def test_each_form_of_the_grammar_reads_as_its_term(text, term):
    assert parse_term(text) == term


def test_only_a_plain_key_value_is_an_equality_the_gin_index_answers():
    assert parse_term("customer:acme").equality == ("customer", "acme")
    for text in ("customer:acme|globex", "!customer:acme", "amount>=1", "amount:1..2"):
        assert parse_term(text).equality is None, text


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("Customer:acme", "does not start with a key"),
        (":acme", "does not start with a key"),
        ("customer", "is not key:value"),
        ("customer:", "is not key:value"),
        ("customer=acme", "is not key:value"),
        ("amount>=lots", "'lots' is not a number"),
        ("amount<", "'' is not a number"),
        ("amount:50..10", "is empty"),
        ("customer:acme||globex", "empty value"),
        ("customer:" + "|".join("abcdefghijk"), "11 alternatives"),
        ("customer:" + "x" * 201, "1 to 200 characters"),
    ],
)
def test_a_bad_expression_is_named_with_what_is_wrong(text, named):
    terms, problems = parse_attr_query([text])
    assert terms == ()
    assert len(problems) == 1 and named in problems[0] and text[:20] in problems[0]


def test_every_bad_term_is_named_and_the_good_ones_are_not():
    terms, problems = parse_attr_query(["customer:acme amount>=x", "!Region:eu"])
    assert [t.text for t in terms] == ["customer:acme"]
    assert len(problems) == 2 and "amount>=x" in problems[0] and "!Region:eu" in problems[1]


def test_terms_come_space_separated_or_repeated_and_at_most_five():
    terms, problems = parse_attr_query(["a:1 b:2", "c:3"])
    assert [t.key for t in terms] == ["a", "b", "c"] and problems == []
    terms, problems = parse_attr_query(["a:1 b:2 c:3 d:4 e:5 f:6"])
    assert terms == () and problems == ["6 attribute filters; at most 5"]
