"""Presentation helpers: status pills carry text, money and durations read at a glance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from dashboard.templatetags.runledger import (
    duration,
    json_summary,
    money,
    params_inline,
    reltime,
    status_pill,
)

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    "status", ["queued", "running", "paused", "waiting", "waitingForPause", "complete", "errored", "terminated"]
)
def test_every_status_pill_has_a_colour_class_and_words(status):
    html = status_pill(status)
    assert f'class="status status-{status}"' in html
    text = html.rsplit("</span>", 2)[-2].rsplit(">", 1)[-1]
    assert text.strip() and text.isalpha()


@pytest.mark.parametrize(
    "value,expected",
    [
        (Decimal("0.012345"), "$0.0123"),
        (Decimal("1234.5"), "$1,234.50"),
        (None, "—"),
        (Decimal("-0.5"), "-$0.5000"),
    ],
)
def test_money(value, expected):
    assert money(value) == expected


@pytest.mark.parametrize(
    "value,expected",
    [
        (0.25, "250 ms"),
        (4.26, "4.3 s"),
        (42, "42 s"),
        (185, "3m 05s"),
        (7800, "2h 10m"),
        (timedelta(days=3, hours=4), "3d 4h"),
        (None, "—"),
    ],
)
def test_duration(value, expected):
    assert duration(value) == expected


def test_times_carry_an_iso_datetime_for_the_browser_to_localise():
    html = reltime(datetime(2025, 1, 6, 12, 0, tzinfo=UTC))
    assert 'datetime="2025-01-06T12:00:00+00:00"' in html and "2025-01-06 12:00:00 UTC" in html


def test_params_read_as_key_value_pairs_and_are_truncated():
    assert params_inline({"account": "acme", "limit": 50}) == "account=acme · limit=50"
    assert params_inline({"q": "x" * 300}).endswith("…")
    assert json_summary({"a": 1, "b": 2}) == "object · 2 keys: a, b"
