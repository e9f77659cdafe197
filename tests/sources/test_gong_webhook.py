from __future__ import annotations

import pytest

from ingest.demo.corpus import demo_calls
from ingest.sources.gong import WebhookInvalid, parse_webhook
from tests.fakes.gong import extensive_json

pytestmark = pytest.mark.pure


def test_it_parses_the_webhook_call_data_into_a_typed_call() -> None:
    call = demo_calls(count=1)[0]
    body = {"callData": extensive_json(call, "https://app.gong.example"), "isTest": True}

    hook = parse_webhook(body)

    assert hook.is_test is True
    assert hook.call.call.id == call.id and isinstance(hook.call.call.id, str)
    assert hook.call.call.started == call.started
    assert [p.name for p in hook.call.parties] == [s.name for s in call.speakers]


def test_a_numeric_call_id_is_kept_as_a_string() -> None:
    hook = parse_webhook({"callData": {"metaData": {"id": 7782342274025937895}}})

    assert hook.call.call.id == "7782342274025937895" and hook.is_test is False


@pytest.mark.parametrize("body", [{}, {"callData": []}, {"callData": {"metaData": {}}}])
def test_a_body_without_a_call_is_rejected(body: dict[str, object]) -> None:
    with pytest.raises(WebhookInvalid):
        parse_webhook(body)
