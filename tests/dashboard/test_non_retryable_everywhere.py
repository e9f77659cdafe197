"""A dead letter whose step raised NonRetryableError is flagged wherever a retry of it can be asked
for (the dead letters list, one dead letter, a redrive's preview, a bulk retry's preview), each
offering a replay with edited params; a letter a retry can help is not flagged."""

from __future__ import annotations

import re

import pytest
from test_ops_factories import failed_instance

pytestmark = pytest.mark.db


def _pair():
    futile = failed_instance(tenant="acme", error="NonRetryableError", message="no account 'acme-x'")
    hopeful = failed_instance(tenant="acme", error="TimeoutError", message="read timed out")
    return futile, hopeful


def test_the_dead_letters_list_flags_the_group_and_the_items_a_retry_cannot_help(operator):
    futile, hopeful = _pair()
    groups = operator.get("/dead-letters/")
    flagged = {g.signature: g.non_retryable for g in groups.context["groups"]}
    assert flagged == {futile.signature: True, hopeful.signature: False}
    assert "non-retryable: a retry fails again" in groups.content.decode()
    items = operator.get(f"/dead-letters/?signature={futile.signature}").content.decode()
    assert "non-retryable" in items and f'href="/dead-letters/{futile.id}/replay/">Replay with edited params' in items
    items = operator.get(f"/dead-letters/?signature={hopeful.signature}").content.decode()
    assert "non-retryable" not in items


def test_one_dead_letter_says_a_retry_fails_again_and_offers_the_replay_first(operator):
    futile, hopeful = _pair()
    html = operator.get(f"/dead-letters/{futile.id}/").content.decode()
    warning = re.search(r'<div class="msg msg-warning" role="alert" id="retry-futile">(.*?)</div>', html, re.S)
    assert warning and "NonRetryableError" in warning[1]
    assert f'href="/dead-letters/{futile.id}/replay/">Replay with edited params' in warning[1]
    assert "(fails again)</button>" in html
    html = operator.get(f"/dead-letters/{hopeful.id}/").content.decode()
    assert 'id="retry-futile"' not in html and "(fails again)" not in html


def test_a_redrive_preview_names_the_letters_it_cannot_help(operator):
    futile, hopeful = _pair()
    r = operator.get(f"/dead-letters/redrive/?mode=ids&ids={futile.id}&ids={hopeful.id}")
    assert [d["id"] for d in r.context["non_retryable"]] == [futile.id]
    html = r.content.decode()
    box = re.search(r'id="redrive-futile">(.*?)</div>', html, re.S)
    assert box and "1 of these will fail the same way" in box[1]
    assert futile.instance_id in box[1] and hopeful.instance_id not in box[1]
    assert f"/dead-letters/{futile.id}/replay/" in box[1]


def test_a_bulk_retry_preview_counts_the_instances_that_fail_the_same_way(operator):
    futile, hopeful = _pair()
    r = operator.get("/bulk-actions/?action=retry&workflow=gong-ingest&status=errored", follow=True)
    assert r.status_code == 200 and r.context["batch"].total == 2
    assert r.context["non_retryable"] == [futile.instance_id]
    box = re.search(r'id="bulk-futile">(.*?)</div>', r.content.decode(), re.S)
    assert box and "1 of these will fail the same way" in box[1]
    assert f"/instances/{futile.instance_id}/actions/replay/" in box[1]
