"""The outside clients `domain-onboard` uses, built once per process from the environment:

    RUNLEDGER_DATAFORSEO_LOGIN / _PASSWORD / _BASE_URL   DataForSEO v3 (base URL default the real API),
                                                          its answers cached (rankdisco/answer_cache.py)
    RUNLEDGER_ZENROWS_API_KEY / _BASE_URL                 ZenRows, the paid tiers of the page fetch
                                                          (without a key only the free native fetch)
    RUNLEDGER_FETCH_PROXY                                 the egress proxy of the native page fetch, read
                                                          as url-classify reads it (the same fetcher)

`clients_install(factory)` replaces how they are built: the demo installs its offline answers
and tests point clients at local fakes (a higher module passes a callable down, so this module
imports neither).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ingest.engine import NonRetryableError
from ingest.rankdisco.answer_cache import TenantAnswerCache
from ingest.sources.dataforseo import DataForSEOClient
from ingest.sources.zenrows import NativeFetcher, ZenRowsClient
from ingest.workflows.url_classify.clients import native_fetcher

__all__ = ["OnboardClients", "clients", "clients_install"]


@dataclass(frozen=True)
class OnboardClients:
    dataforseo: DataForSEOClient
    native: NativeFetcher
    zenrows: ZenRowsClient | None = None


Factory = Callable[[], OnboardClients]
_lock = threading.Lock()
_factory: Factory | None = None
_built: OnboardClients | None = None


def from_environment() -> OnboardClients:
    env = os.environ
    login, password = env.get("RUNLEDGER_DATAFORSEO_LOGIN", ""), env.get("RUNLEDGER_DATAFORSEO_PASSWORD", "")
    if not login or not password:
        raise NonRetryableError(
            "DataForSEO is not configured: set RUNLEDGER_DATAFORSEO_LOGIN and RUNLEDGER_DATAFORSEO_PASSWORD "
            "in the worker's environment, then retry the instance")
    # Answers kept per tenant, endpoint and task for RUNLEDGER_DATAFORSEO_CACHE_HOURS (a setting).
    dataforseo = DataForSEOClient(login=login, password=password, cache=TenantAnswerCache(),
                                  base_url=env.get("RUNLEDGER_DATAFORSEO_BASE_URL", "https://api.dataforseo.com"))
    key = env.get("RUNLEDGER_ZENROWS_API_KEY", "")
    zenrows = ZenRowsClient(api_key=key, base_url=env.get("RUNLEDGER_ZENROWS_BASE_URL",
                                                          "https://api.zenrows.com/v1/")) if key else None
    # The brand pages go out through the egress proxy url-classify's fetches use, when one is set.
    return OnboardClients(dataforseo=dataforseo, native=native_fetcher(), zenrows=zenrows)


def clients_install(factory: Factory | None) -> None:
    """Build the clients with `factory` from now on (None: from the environment again)."""
    global _factory, _built
    with _lock:
        _factory, _built = factory, None


def clients() -> OnboardClients:
    global _built
    with _lock:
        if _built is None:
            _built = (_factory or from_environment)()
        return _built
