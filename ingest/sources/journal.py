"""A paid call is paid once: every paid client's exchange goes through the step's call journal.

The shared plumbing of the paid clients (`client.HttpClient._paid_exchange` for DataForSEO and
ZenRows, `llm.common.JsonApi` for the LLM and embedding providers) sends each call through
`journaled(provider, exchange, request=…)`. Inside a step it asks the attempt's journal
(`ingest.engine.StepJournal`) for the call's slot:

- a lost run of this step was answered for the same `request` at this place: that answer is
  rebuilt as the `requests.Response` it was and handed back, and nothing is sent;
- otherwise `exchange(key)` sends the call (`key` is the step's idempotency key with the
  attempt and the call's ordinal, which the client passes on where the provider takes one:
  DataForSEO's task `tag`, an OpenAI-compatible `Idempotency-Key` header) and a 2xx answer, what
  the providers bill, is journaled before the client reads it.

Outside a step (a management command, the console testing a connection) the call goes as it is.
`request` is what identifies the call, without credentials: a replay answers only the question
the lost run asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict
from urllib.parse import urlsplit

import requests
from requests.structures import CaseInsensitiveDict

from ingest.engine import call_journal_current, fingerprint_of

__all__ = ["journaled"]

# Said of the bytes on the wire, not of the text kept: a replay's body is that text in UTF-8.
TRANSPORT_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class JournaledAnswer(TypedDict):
    status: int
    url: str
    headers: dict[str, str]
    text: str


def journaled(provider: str, exchange: Callable[[str | None], requests.Response], *, request: Any) -> requests.Response:
    """`exchange(key)`'s answer, or the answer the step's journal holds for this call."""
    journal = call_journal_current()
    if journal is None:
        return exchange(None)
    slot = journal.call(fingerprint_of(provider, request))
    if slot.replayed:
        return response_of(slot.answer)
    response = exchange(slot.provider_key)
    if 200 <= response.status_code < 300:
        journal.record(slot, provider=provider, answer=answer_of(response))
    return response


def answer_of(response: requests.Response) -> JournaledAnswer:
    """What a replay needs of an answer: its status, URL (no query), headers and body as text."""
    try:
        text = response.content.decode("utf-8")
    except UnicodeDecodeError:  # a page in another charset: requests decodes it as it would
        text = response.text
    headers = {k: v for k, v in response.headers.items() if k.lower() not in TRANSPORT_HEADERS}
    # Without its query: ZenRows takes its API key there.
    url = urlsplit(str(response.url or ""))._replace(query="", fragment="").geturl()
    return {"status": response.status_code, "url": url, "headers": headers, "text": text}


def response_of(answer: JournaledAnswer) -> requests.Response:
    """The journaled answer as a `requests.Response` the client reads as it read the original."""
    response = requests.Response()
    response.status_code = int(answer["status"])
    response.url = answer["url"]
    response.headers = CaseInsensitiveDict(answer["headers"])
    response._content = answer["text"].encode("utf-8")
    response.encoding = "utf-8"
    return response
