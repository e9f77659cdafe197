"""What the call journal keeps of an answer reads back as the answer the client read: status,
headers and text (whatever the page's charset), without the URL's query (ZenRows takes its API
key there) or the transport's headers."""

from __future__ import annotations

import pytest
import requests

from ingest.sources.journal import answer_of, response_of

pytestmark = pytest.mark.pure


def answer(body: bytes, content_type: str) -> requests.Response:
    response = requests.Response()
    response.status_code = 200
    response.url = "https://api.zenrows.com/v1/?apikey=zr-secret-key&url=https%3A%2F%2Facme.example%2F"
    response.headers.update(
        {
            "Content-Type": content_type,
            "Content-Length": str(len(body)),
            "Content-Encoding": "gzip",
            "X-Request-Cost": "0.001",
        }
    )
    response._content = body
    return response


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ('{"tasks": [{"cost": 0.02, "result": ["café"]}]}'.encode(), "application/json"),
        ("<html><title>Café crème</title></html>".encode("latin-1"), "text/html; charset=iso-8859-1"),
    ],
)
def test_a_journaled_answer_reads_back_as_the_client_read_it(body: bytes, content_type: str) -> None:
    original = answer(body, content_type)
    kept = answer_of(original)
    replayed = response_of(kept)
    assert replayed.status_code == 200 and replayed.text == original.text
    assert replayed.headers["X-Request-Cost"] == "0.001" and replayed.headers["content-type"] == content_type
    assert "Content-Length" not in replayed.headers and "Content-Encoding" not in replayed.headers
    assert "zr-secret-key" not in str(kept) and replayed.url == "https://api.zenrows.com/v1/"
    if content_type == "application/json":
        assert replayed.json() == original.json()
