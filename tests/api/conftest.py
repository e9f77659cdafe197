from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from dashboard.access import user_ensure
from dashboard.models import Role
from ingest.triggers.services import api_token_create
from tests.triggers import support  # noqa: F401  (registers the test workflows)


class ApiClient:
    """The Django test client with a bearer token and JSON bodies."""

    def __init__(self, token: str) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {token}"}

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(path, params, headers=self.headers)

    def post(self, path: str, body: Any = None) -> Any:
        return self.client.post(
            path, body if body is not None else {}, content_type="application/json", headers=self.headers
        )

    def put(self, path: str, body: Any) -> Any:
        return self.client.put(path, body, content_type="application/json", headers=self.headers)


def persona(username: str, memberships: list[tuple[str, str]], staff: bool = False) -> ApiClient:
    user = user_ensure(username=username, password="pw-" + username, memberships=memberships, staff=staff)
    _, token = api_token_create(user=user, name=f"{username}-token")
    return ApiClient(token)


@pytest.fixture
def operator(db: Any) -> ApiClient:
    return persona("op", [("acme", Role.OPERATOR)])


@pytest.fixture
def viewer(db: Any) -> ApiClient:
    return persona("view", [("acme", Role.VIEWER)])


@pytest.fixture
def stranger(db: Any) -> ApiClient:
    return persona("strange", [("initech", Role.OPERATOR)])


@pytest.fixture
def admin(db: Any) -> ApiClient:
    return persona("boss", [("acme", Role.ADMIN), ("initech", Role.ADMIN)], staff=True)
