from __future__ import annotations

from typing import Any

import pytest

from ingest.triggers.services import ingress_secret_create, route_upsert
from tests.triggers import support  # noqa: F401  (registers the test workflows)


@pytest.fixture
def acme_creds(db: Any) -> dict[str, str]:
    _, token, secret = ingress_secret_create(tenant="acme")
    return {"token": token, "secret": secret}


@pytest.fixture
def route(db: Any) -> Any:
    return route_upsert(name="orders", workflow="test-echo", tenant="acme")


