"""The bulk selection's pure parts: parsing ids, the preview token, the change between two sets."""

from __future__ import annotations

import pytest

from dashboard.selection import (
    Change,
    SelectionError,
    Snapshot,
    ids_parse,
    selection_change,
    token_issue,
    token_read,
)

pytestmark = pytest.mark.pure


def test_ids_parse_accepts_repeated_and_comma_separated_ids():
    assert ids_parse(["3", "1,2", " 2 "]) == [1, 2, 3]


@pytest.mark.parametrize("values", [[], [""], ["abc"], ["1,abc"], ["-1"], ["0"], ["1.5"], ["٣"], ["9" * 30]])
def test_ids_parse_refuses_empty_or_unparsable_lists(values):
    with pytest.raises(SelectionError):
        ids_parse(values)


def test_a_token_round_trips_for_its_user_and_action_only():
    snap = Snapshot("redrive", {"signature": "abc"}, None, [4, 7])
    token = token_issue(user_id=1, snapshot=snap)
    assert token_read(token, user_id=1, action="redrive") == snap
    with pytest.raises(SelectionError, match="another user"):
        token_read(token, user_id=2, action="redrive")
    with pytest.raises(SelectionError, match="another user or action"):
        token_read(token, user_id=1, action="discard")
    with pytest.raises(SelectionError, match="invalid"):
        token_read(token[:-2] + "xx", user_id=1, action="redrive")
    with pytest.raises(SelectionError, match="no preview token"):
        token_read("", user_id=1, action="redrive")


def test_selection_change_names_what_was_added_and_removed():
    assert selection_change([1, 2, 3], [3, 2, 1]) is None
    assert selection_change([1, 2, 3], [2, 3, 9, 8]) == Change(added=[8, 9], removed=[1])
