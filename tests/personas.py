"""The README's `operator` persona reading the instances list, for the pipelines' tests: a run a
workflow tagged must be found by the filter an operator types (`/instances/?attr=key:value`)."""

from __future__ import annotations

import re

from django.test import Client

from dashboard.access import demo_users_ensure

ROW = re.compile(r'<tr id="row-([^"]+)"')


def operator_client() -> Client:
    """Signed in as `operator` (acme, globex and default), as the README tells a newcomer."""
    demo_users_ensure()
    client = Client()
    assert client.login(username="operator", password="operator")
    return client


def listed(client: Client, query: str) -> list[str]:
    """The instance ids `/instances/?<query>` lists, in its order; a refused query fails here."""
    response = client.get(f"/instances/?{query}")
    assert response.status_code == 200, response.content.decode()[:500]
    return ROW.findall(response.content.decode())
