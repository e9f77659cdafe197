"""Hypothesis over the webhooks: valid Gong call data, CDC events and Outbound Messages with
fields replaced by hostile values of every type. Never a 5xx, always the JSON envelope, and a
refused post changes no row (tests/fuzzing.py)."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any
from xml.sax.saxutils import escape

import pytest
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzzing import answered, content_types, fuzz, hostile_body, json_values, raw_json
from tests.ingest.test_hooks_bad_input import CALL, CDC, GONG, OUT
from tests.ingest.test_hooks_bad_input import hooks as hooks  # noqa: F401  (the fixture)
from tests.sources.test_salesforce_events import CDC_MESSAGE, OUTBOUND

pytestmark = [pytest.mark.db, pytest.mark.django_db]

GONG_PATHS = [
    ("metaData",),
    ("metaData", "id"),
    ("metaData", "started"),
    ("metaData", "duration"),
    ("metaData", "title"),
    ("parties",),
    ("parties", 0),
    ("parties", 0, "name"),
    ("content",),
    ("context",),
    (),
]
CDC_PATHS = [
    ("data",),
    ("data", "payload"),
    ("data", "event"),
    ("data", "event", "replayId"),
    ("data", "payload", "ChangeEventHeader"),
] + [
    ("data", "payload", "ChangeEventHeader", key)
    for key in (
        "entityName",
        "recordIds",
        "changeType",
        "commitTimestamp",
        "changedFields",
        "commitNumber",
        "sequenceNumber",
        "commitUser",
        "nulledFields",
    )
]
OUTBOUND_SLOTS = [
    "006000000000001AAA",
    "Proposal/Price Quote",
    "00D000000000062EAA",
    "04l000000000001AAA",
    "sf:Opportunity",
    "50000.0",
]
hostile_values = json_values | st.sampled_from(
    [
        10**30,
        1e300,
        -1,
        [],
        {},
        "",
        "9999-12-31T23:59:59-01:00",
        "0001-01-01T00:00:00+01:00",
        ["006RM000003bDwlYAE"] * 250,
        [None],
        [[]],
        "x" * 5000,
        {"id": "\x00"},
    ]
)


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    """`document` with the value at `path` replaced (or the whole document when path is empty)."""
    if not path:
        return value
    out = copy.deepcopy(document)
    node = out
    for step in path[:-1]:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            return out
    with contextlib.suppress(IndexError, TypeError):
        node[path[-1]] = value
    return out


def post(client: Client, path: str, body: bytes | str, content_type: str) -> Any:
    return answered("hooks", path, lambda: client.post(path, body, content_type=content_type))


@fuzz(400)
@given(path=st.sampled_from(GONG_PATHS), value=hostile_values, is_test=st.sampled_from([False, True, "yes", None]))
def test_gong_call_data_with_any_field_replaced_is_answered_cleanly(
    hooks: Client,
    path: tuple[Any, ...],  # noqa: F811
    value: Any,
    is_test: Any,
) -> None:
    body = {"callData": replaced(CALL, path, value), "isTest": is_test}
    post(hooks, GONG, raw_json(body), "application/json")


@fuzz(400)
@given(path=st.sampled_from(CDC_PATHS), value=hostile_values, batch=st.integers(min_value=1, max_value=3))
def test_cdc_events_with_any_header_replaced_are_answered_cleanly(
    hooks: Client,
    path: tuple[Any, ...],  # noqa: F811
    value: Any,
    batch: int,
) -> None:
    message = replaced(CDC_MESSAGE, path, value)
    post(hooks, CDC, raw_json([message] * batch if batch > 1 else message), "application/json")


@fuzz(300)
@given(
    slot=st.sampled_from(OUTBOUND_SLOTS),
    value=st.text(max_size=40)
    | st.sampled_from(["", "9999-12-31T23:59:59-01:00", "&#0;", "&#xD800;", "]]>", "<x>", "&amp;", "x" * 300]),
    extra=st.sampled_from(["", "<sf:LastModifiedDate>{v}</sf:LastModifiedDate>", "<sf:{v}>1</sf:{v}>"]),
    raw_value=st.booleans(),
)
def test_outbound_messages_with_any_field_replaced_are_answered_cleanly(
    hooks: Client,
    slot: str,
    value: str,  # noqa: F811
    extra: str,
    raw_value: bool,
) -> None:
    shown = value if raw_value else escape(value)
    body = OUTBOUND.replace(slot, shown, 1)
    if extra:
        body = body.replace("<sf:Amount>", extra.format(v=shown) + "<sf:Amount>", 1)
    post(hooks, OUT, body.encode("utf-8", "surrogatepass"), "text/xml")


@fuzz(300)
@given(
    body=hostile_body,
    content_type=content_types,
    path=st.sampled_from([GONG, CDC, OUT, "/hooks/gong/nope", "/hooks/gong/hook%00g", "/hooks/salesforce/x"]),
)
def test_hostile_bodies_to_any_hook_are_refused_cleanly(
    hooks: Client,
    body: bytes,
    content_type: str,  # noqa: F811
    path: str,
) -> None:
    post(hooks, path, body, content_type)


def test_the_unchanged_documents_are_accepted(hooks: Client) -> None:  # noqa: F811
    """The fuzzers start from documents the hooks accept: a refusal comes from the change."""
    assert post(hooks, GONG, json.dumps({"callData": CALL}), "application/json").status_code == 202
    assert post(hooks, CDC, json.dumps(CDC_MESSAGE), "application/json").status_code == 202
    assert post(hooks, OUT, OUTBOUND, "text/xml").status_code == 200
