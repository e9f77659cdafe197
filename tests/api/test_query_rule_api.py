"""Under /api/ a query parameter that does not parse is a 4xx JSON error naming it, as the
console pages name it in the layout."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.db


@pytest.mark.parametrize(
    ("path", "params", "name", "value"),
    [
        ("/api/audit", {"source": "zzz"}, "source", "zzz"),
        ("/api/instances", {"id": "\x00"}, "id", "NUL"),
        ("/api/instances", {"since": "notadate"}, "since", ""),
        ("/api/dead-letters", {"state": "zzz"}, "state", ""),
        ("/api/costs", {"since": "notadate"}, "since", ""),
    ],
)
def test_a_bad_query_parameter_is_a_json_4xx_that_names_it(operator, path, params, name, value):
    response = operator.get(path, **params)
    assert 400 <= response.status_code < 500 and response["Content-Type"] == "application/json"
    message = response.json()["error"]["message"]
    assert name in message and value in message, message
