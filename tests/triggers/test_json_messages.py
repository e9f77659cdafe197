"""What the one JSON parser says about a body that does not parse: each word once."""

from __future__ import annotations

import pytest

from ingest.triggers import limits
from ingest.triggers.errors import MalformedJson

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"a": "x\x01y"}', "Invalid control character at line 1 column 9"),
        (b'{"a": }', "Expecting value at line 1 column 7"),
    ],
)
def test_a_parse_error_names_its_place_once(body, says):
    with pytest.raises(MalformedJson) as raised:
        limits.json_parse(body, limits=limits.input_limits(), what="the body")
    assert says in str(raised.value) and " at at " not in str(raised.value)
