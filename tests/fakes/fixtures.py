"""Pytest fixtures for the fake servers; import them into a conftest.py:

from tests.fakes.fixtures import fake_anthropic, fake_gong, fake_openai, fake_salesforce  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes import FakeAnthropic, FakeGong, FakeOpenAI, FakeSalesforce


@pytest.fixture
def fake_gong() -> Iterator[FakeGong]:
    with FakeGong() as server:
        yield server


@pytest.fixture
def fake_salesforce() -> Iterator[FakeSalesforce]:
    with FakeSalesforce() as server:
        yield server


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server
