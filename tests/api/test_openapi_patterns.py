"""The OpenAPI document's patterns say what the server refuses, in a form every validator reads.

A pattern a validator cannot compile is not a weaker rule but no rule: schemathesis (built on
jsonschema_rs, whose regexes are Rust's and refuse U+D800 anywhere in a pattern) dropped the
schema's patterns, drew a channel named "\\x0b", and the service, which trims names, refused it
with 422. So every pattern must compile there, and the "not blank" pattern must refuse exactly
the text that `str.strip()` empties."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import jsonschema_rs
import pytest
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from dashboard.api.openapi import NONBLANK_PATTERN, SPACES, TEXT_PATTERN

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def patterns(node: Any, where: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield where, value
            else:
                yield from patterns(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from patterns(value, f"{where}/{i}")


def test_every_pattern_of_the_document_compiles_in_a_rust_regex_validator(db: Any) -> None:
    document = Client().get("/api/openapi.json").json()
    found = dict(patterns(document))
    assert len(found) > 20  # the walk reached the schemas
    refused = []
    for where, pattern in found.items():
        try:
            jsonschema_rs.validator_for({"type": "string", "pattern": pattern})
        except jsonschema_rs.ValidationError:
            refused.append(f"{where}: {pattern}")
    assert not refused, "\n".join(refused)


def test_spaces_are_what_strip_trims() -> None:
    assert set(SPACES) == {chr(c) for c in range(0x110000) if chr(c).isspace()}


@pytest.mark.parametrize("text", ["\x0b", "\x1e", " \t\r\n", "\u3000", "\x85", "\xa0 \u2028"])
def test_a_blank_name_matches_no_nonblank_pattern(text: str) -> None:
    assert text.strip() == ""
    assert not re.search(NONBLANK_PATTERN, text)
    assert not jsonschema_rs.validator_for({"type": "string", "pattern": NONBLANK_PATTERN}).is_valid(text)


@given(st.text(max_size=8))
def test_the_nonblank_pattern_agrees_with_strip_in_both_dialects(text: str) -> None:
    # Python's re and the Rust validator read the pattern the same, and both agree with strip().
    rust = jsonschema_rs.validator_for({"type": "string", "pattern": NONBLANK_PATTERN})
    expected = bool(text.strip()) and "\x00" not in text
    assert bool(re.search(NONBLANK_PATTERN, text)) is expected
    assert rust.is_valid(text) is expected


def test_text_pattern_refuses_nul_only() -> None:
    rust = jsonschema_rs.validator_for({"type": "string", "pattern": TEXT_PATTERN})
    assert rust.is_valid("any text ✓") and not rust.is_valid("a\x00b")


@pytest.mark.parametrize(
    ("pattern_of", "refused", "accepted"),
    [
        # The list splits `attr` on str.split()'s spaces: U+0085 inside a value would make two pieces.
        ("attr", ["glx9if:a\x85b", "key:a b", "key:\x1cx"], ["customer:acme", " customer:acme\t", ""]),
        # An id the server strips and reads as a number: U+FEFF is a JavaScript space but not Python's.
        ("ids", ["\ufeff5", "5\u200b", "0"], ["5", " 12\u3000"]),
        ("source", ["\x98", "webs"], ["api", " cli ", ""]),
    ],
)
def test_patterns_of_stripped_values_use_pythons_spaces(
    pattern_of: str, refused: list[str], accepted: list[str]
) -> None:
    from dashboard.api.audit import AuditQuery
    from dashboard.api.dead_letters import RedriveIn
    from dashboard.api.instances import ATTR_PATTERN

    pattern = {
        "attr": ATTR_PATTERN,
        "ids": RedriveIn.model_json_schema()["properties"]["ids"]["anyOf"][0]["items"]["anyOf"][1]["pattern"],
        "source": AuditQuery.model_json_schema()["properties"]["source"]["pattern"],
    }[pattern_of]
    rust = jsonschema_rs.validator_for({"type": "string", "pattern": pattern})
    assert [text for text in refused if rust.is_valid(text)] == []
    assert [text for text in accepted if not rust.is_valid(text)] == []


def string_schemas(node: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield where, node
        for key, value in node.items():
            yield from string_schemas(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from string_schemas(value, f"{where}/{i}")


def test_no_pattern_becomes_a_huge_repetition_when_a_generator_folds_its_length_in(db: Any) -> None:
    """Schemathesis folds a string's minLength/maxLength into its pattern (`X*` with maxLength
    262144 becomes `X{0,262144}`) and compiles the result: a repetition that large costs a Rust
    regex seconds and then exceeds its size limit, and the strict run paid that on every request
    body holding free JSON. The document's patterns are written so the fold leaves them small."""
    from schemathesis.core.jsonschema.patterns import update_quantifier

    document = Client().get("/api/openapi.json").json()
    found = list(string_schemas(document))
    assert any(s.get("maxLength", 0) >= 100_000 for _, s in found)  # the free-JSON strings are here
    huge = []
    for where, schema in found:
        folded = update_quantifier(schema["pattern"], schema.get("minLength"), schema.get("maxLength"))
        bounds = [int(n) for n in re.findall(r"\{\d*,?(\d+)\}", folded)]
        if bounds and max(bounds) > 1000:
            huge.append(f"{where}: {folded[:120]}")
    assert not huge, "\n".join(huge)


@given(st.text(max_size=8))
def test_the_text_pattern_refuses_exactly_text_with_a_nul(text: str) -> None:
    rust = jsonschema_rs.validator_for({"type": "string", "pattern": TEXT_PATTERN})
    assert bool(re.search(TEXT_PATTERN, text)) is ("\x00" not in text)
    assert rust.is_valid(text) is ("\x00" not in text)


def test_an_event_type_the_engine_refuses_as_blank_is_outside_the_schema(db: Any) -> None:
    document = Client().get("/api/openapi.json").json()
    schema = document["components"]["schemas"]["EventIn"]["properties"]["type"]
    rust = jsonschema_rs.validator_for(schema)
    assert [t for t in ["\n", " ", "\u3000", "\x00"] if rust.is_valid(t)] == []
    assert rust.is_valid("approved") and rust.is_valid(" approved ")
