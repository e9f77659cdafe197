"""Search attribute values as the workflows set them: one token an operator can type, never a
value the engine would refuse."""

from __future__ import annotations

import pytest

from ingest.workflows.gong import gong_search_attributes
from ingest.workflows.salesforce import record_search_attributes
from ingest.workflows.search_attributes import search_slug, searchable

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("Acme Logistics", "acme-logistics"),
        ("Acme Logistics, Inc.", "acme-logistics-inc"),
        ("  Hooli  ", "hooli"),
        ("Müller GmbH", "müller-gmbh"),
        ("O'Brien & Sons_Ltd", "o-brien-sons-ltd"),
    ],
)
def test_a_name_becomes_one_lower_case_token(name: str, slug: str) -> None:
    assert search_slug(name) == slug
    assert not any(c.isspace() for c in search_slug(name))


def test_unknown_and_over_long_values_are_left_out_and_the_rest_kept_as_given() -> None:
    assert searchable(a="x", b=None, c="", d=0, e="y" * 200, f="z" * 201) == {"a": "x", "d": 0, "e": "y" * 200}


def test_a_call_is_tagged_by_its_account_only_when_the_params_name_it() -> None:
    assert gong_search_attributes({"call_id": 42, "title": "Jane Roe <> Northwind"}) == {"call_id": "42"}
    assert gong_search_attributes({"call_id": "42", "account": "Acme Logistics"}) == {
        "call_id": "42",
        "account": "acme-logistics",
    }


def test_a_record_gives_its_account_name_and_id_when_it_has_them() -> None:
    assert record_search_attributes(None) == {}
    assert record_search_attributes({"Id": "006x"}) == {}
    assert record_search_attributes({"AccountId": "001A", "Account": {"Name": "Stark Freight"}}) == {
        "account": "stark-freight",
        "account_id": "001A",
    }
