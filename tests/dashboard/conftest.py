"""Personas for the dashboard tests: `operator` may act on acme, globex and default; `viewer`
reads acme; `stranger` operates initech only. Each is a logged-in Django test client."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from dashboard.access import demo_users_ensure


def _client(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password=username)
    return client


@pytest.fixture
def users(db: Any) -> None:
    demo_users_ensure()


@pytest.fixture
def operator(users: None) -> Client:
    return _client("operator")


@pytest.fixture
def viewer(users: None) -> Client:
    return _client("viewer")


@pytest.fixture
def stranger(users: None) -> Client:
    return _client("stranger")
