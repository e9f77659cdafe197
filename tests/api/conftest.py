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


# Shared by the schemathesis tests (test_openapi_strict.py, test_openapi_schemathesis.py).
TILE_BUDGET = 200_000


def _nodes(value: Any, budget: int) -> int:
    """JSON nodes in `value`, counted up to `budget` (then `budget`)."""
    count, stack = 0, [value]
    while stack and count < budget:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


@pytest.fixture
def bounded_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """A negative case for `maxItems` draws an array one item longer by repeating one element.
    JsonValue is recursive, so the longer bound holds at every depth and the element repeated
    10,001 times is itself such an array: 10^8 values, gigabytes before one request is sent. Such
    draws are rejected (hypothesis draws another); an array one item too long of small values is
    still sent at every depth."""
    from hypothesis import reject
    from schemathesis.generation.jsonschema import strategy

    tiled = strategy._tiled

    def bounded(item: Any, length: int) -> Any:
        if _nodes(item, TILE_BUDGET) * length >= TILE_BUDGET:
            reject()
        return tiled(item, length)

    monkeypatch.setattr(strategy, "_tiled", bounded)
