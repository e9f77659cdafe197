"""The plumbing the HTTP clients share: their transport keywords and defaults, the kinds of
failure every source's errors belong to, and errors that survive a process boundary."""

from __future__ import annotations

import pickle
import socket
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from ingest.sources import errors
from ingest.sources.dataforseo import DataForSEOClient
from ingest.sources.dataforseo_errors import DataForSEOPaymentRequired, DataForSEORateLimited
from ingest.sources.gong import GongClient, GongRateLimited, GongUnavailable
from ingest.sources.http import RateLimiter
from ingest.sources.llm.common import LLMRateLimited
from ingest.sources.outbound import InProcess
from ingest.sources.salesforce import SalesforceLimitExceeded
from ingest.sources.zenrows import ZenRowsClient, ZenRowsPaymentRequired, ZenRowsRateLimited

pytestmark = pytest.mark.pure
NEW_YEAR = datetime(2026, 1, 1, tzinfo=UTC)


def test_each_client_keeps_its_own_defaults_and_takes_the_transport_keywords() -> None:
    gong = GongClient(access_key="k", access_key_secret="s", base_url="http://127.0.0.1:9/")
    zen = ZenRowsClient(api_key="k", base_url="http://127.0.0.1:9/v1/", max_inline_wait=1.5)
    assert (gong.base_url, gong.max_rate_limit_retries, gong.max_inline_wait) == (
        "http://127.0.0.1:9",
        3,
        30.0,
    )
    assert (zen.base_url, zen.timeout, zen.max_rate_limit_retries, zen.max_inline_wait) == (
        "http://127.0.0.1:9/v1/",
        (5.0, 90.0),
        2,
        1.5,
    )  # ZenRows keeps its trailing slash
    dfs = DataForSEOClient(login="l", password="p", limiter=InProcess(RateLimiter(10)))
    assert (dfs.base_url, dfs.timeout, dfs.max_rate_limit_retries) == (
        "https://api.dataforseo.com",
        (5.0, 60.0),
        2,
    )


def test_a_misspelt_transport_keyword_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"GongClient\(\) got unexpected keyword arguments: timout"):
        GongClient(access_key="k", access_key_secret="s", timout=(1.0, 1.0))  # type: ignore[call-arg]


def test_every_sources_rate_limit_is_one_kind_and_keeps_its_own_flags() -> None:
    for cls in (
        GongRateLimited,
        ZenRowsRateLimited,
        DataForSEORateLimited,
        LLMRateLimited,
        SalesforceLimitExceeded,
    ):
        error = cls("slow down", retry_after=2.0)
        assert isinstance(error, errors.RateLimited) and error.retryable and error.retry_after == 2.0
    assert ZenRowsPaymentRequired("x").needs_operator and DataForSEOPaymentRequired("x").needs_operator
    assert not GongRateLimited("x").needs_operator


def test_an_error_crosses_a_process_boundary_with_every_attribute() -> None:
    error = DataForSEOPaymentRequired("no balance", status=200, code=40200, cost=Decimal("0.02"), retry_after=None)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.code, copy.cost, copy.status, copy.needs_operator) == (
        DataForSEOPaymentRequired,
        "no balance",
        40200,
        Decimal("0.02"),
        200,
        True,
    )
    flipped = pickle.loads(pickle.dumps(GongRateLimited("x", retryable=False, retry_after=3.0)))
    assert (flipped.retryable, flipped.retry_after) == (False, 3.0)


def test_a_refused_connection_is_the_clients_unavailable_error_naming_what_was_sent() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = GongClient(
        access_key="k",
        access_key_secret="s",
        base_url=f"http://127.0.0.1:{port}",
        timeout=(5.0, 5.0),
    )
    with pytest.raises(GongUnavailable, match=rf"Gong GET http://127.0.0.1:{port}/v2/calls failed to connect"):
        client.calls_page(from_time=NEW_YEAR, to_time=NEW_YEAR)
