"""The API document's cron pattern states exactly what the schedules' service accepts: every
expression the pattern allows is valid (so a schema-valid schedule is never refused for its cron),
and the Quartz forms croniter refuses are outside it."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dashboard.api.trigger_schemas import CRON_PATTERN
from ingest.triggers import cron
from ingest.triggers.errors import InvalidCron

pytestmark = pytest.mark.pure

PATTERN = re.compile(CRON_PATTERN)


@settings(max_examples=300, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.from_regex(CRON_PATTERN, fullmatch=True))
def test_every_expression_the_pattern_allows_is_valid_and_plans(expression: str) -> None:
    valid = cron.validate_cron(expression)
    fires = cron.upcoming(cron.Spec(valid), now=datetime(2026, 11, 28, tzinfo=UTC), count=2)
    assert all(f.tzinfo is not None for f in fires)


@pytest.mark.parametrize(
    "expression",
    [
        "0 0 L-3 * *",
        "0 0 5W,L * *",
        "0 0 L/2 * *",
        "0 0 15W/2 * *",
        "0 0 LW * 1",
        "0 0 * * 1L/2",
        "0 0 * * 1#2,3",
        "0 0 * * 1L-3",
    ],
)
def test_quartz_forms_croniter_refuses_are_outside_the_pattern(expression: str) -> None:
    assert PATTERN.match(expression) is None
    with pytest.raises(InvalidCron):
        cron.validate_cron(expression)


@pytest.mark.parametrize(
    "expression",
    ["59 23 LW * *", "0 0 L,15 * *", "0 9 15W * *", "0 0 * * 1L,2#3", "0 0 31 2 *", "@daily", "*/15 8-18 * * 1-5"],
)
def test_the_forms_the_service_takes_are_inside_the_pattern(expression: str) -> None:
    assert PATTERN.match(expression) is not None
    assert cron.validate_cron(expression) == expression


def test_the_coalesce_schema_refuses_what_the_service_refuses_for_its_shape() -> None:
    """The document's coalesce setting: a shape outside it (an unknown field, a missing period, a
    batch of one, a timeout of false) is one the service refuses too, and the documented forms
    are taken."""
    import jsonschema_rs

    from dashboard.api.trigger_schemas import COALESCE
    from ingest.triggers import coalesce
    from ingest.triggers.errors import InvalidCoalesce

    good = [
        None,
        {},
        {"debounce": {"key": "account", "period": "30 seconds", "timeout": "5 minutes"}},
        {"debounce": {"period": 0.5, "timeout": None}},
        {"batch": {"key": "", "max_size": 2, "timeout": 10}},
    ]
    bad = [
        {"debounce": {"period": "10 seconds", "delay": 1}},
        {"debounce": {}},
        {"batch": {"max_size": 1, "timeout": 5}},
        {"debounce": {"period": "10 seconds", "timeout": False}},
        {"batch": {"max_size": 5}},
        {"debounce": {"period": 5}, "batch": {"max_size": 2, "timeout": 5}},
        {"debounce": {"period": 0}},
        {"debounce": {"period": 5, "key": "a..b"}},
        {"other": {}},
    ]
    for value in good:
        assert jsonschema_rs.is_valid(COALESCE, value), value
        coalesce.parse(value)
    for value in bad:
        assert not jsonschema_rs.is_valid(COALESCE, value), value
        with pytest.raises(InvalidCoalesce):
            coalesce.parse(value)
