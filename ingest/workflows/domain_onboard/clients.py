"""The outside clients `domain-onboard` uses, from the tenant's connections (the console's
Connections page) and else from the environment, built once per configuration and process:

    DataForSEO connection, else
    RUNLEDGER_DATAFORSEO_LOGIN / _PASSWORD / _BASE_URL   DataForSEO v3 (base URL default the real API),
                                                          its answers cached (rankdisco/answer_cache.py)
    ZenRows connection, else
    RUNLEDGER_ZENROWS_API_KEY / _BASE_URL                 ZenRows, the paid tiers of the page fetch
                                                          (without a key only the free native fetch)
    RUNLEDGER_FETCH_PROXY                                 the egress proxy of the native page fetch, read
                                                          as url-classify reads it (the same fetcher)

`clients_install(factory)` replaces how they are built: the demo installs its offline answers
and tests point clients at local fakes (a higher module passes a callable down, so this module
imports neither).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from ingest.engine import NonRetryableError
from ingest.pipelines.selectors import (
    DataForSEOConfig,
    ZenRowsConfig,
    dataforseo_config_get,
    zenrows_config_get,
)
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
# Built once per configuration (the connections' settings are cached for a few seconds by the
# selectors, and a client keeps its session and rate limit), shared by the tenants that have it.
_by_config: dict[tuple[DataForSEOConfig, ZenRowsConfig], OnboardClients] = {}


def from_connections(tenant: str = "") -> OnboardClients:
    """The tenant's DataForSEO and ZenRows connections, each else the environment's settings."""
    dfs = dataforseo_config_get(tenant=tenant)
    if not dfs.login or not dfs.password:
        raise NonRetryableError(
            f"DataForSEO is not configured for tenant {tenant!r}: add its DataForSEO connection on the console's "
            "Connections page (or set RUNLEDGER_DATAFORSEO_LOGIN and RUNLEDGER_DATAFORSEO_PASSWORD in the "
            "worker's environment), then retry the instance"
        )
    zr = zenrows_config_get(tenant=tenant)
    key = (dfs, zr)
    with _lock:
        if key not in _by_config:
            # Answers kept per tenant, endpoint and task for RUNLEDGER_DATAFORSEO_CACHE_HOURS (a setting).
            dataforseo = DataForSEOClient(
                login=dfs.login, password=dfs.password, cache=TenantAnswerCache(), base_url=dfs.base_url
            )
            zenrows = ZenRowsClient(api_key=zr.api_key, base_url=zr.base_url) if zr.api_key else None
            # The brand pages go out through the egress proxy url-classify's fetches use, when one is set.
            _by_config[key] = OnboardClients(dataforseo=dataforseo, native=native_fetcher(), zenrows=zenrows)
        return _by_config[key]


def clients_install(factory: Factory | None) -> None:
    """Build the clients with `factory` from now on, for every tenant (None: from the tenants'
    connections and the environment again)."""
    global _factory, _built
    with _lock:
        _factory, _built = factory, None
        _by_config.clear()


def clients(tenant: str = "") -> OnboardClients:
    """The clients of `tenant`'s steps: an installed factory's, else built from its connections."""
    global _built
    with _lock:
        if _factory is not None:
            if _built is None:
                _built = _factory()
            return _built
    return from_connections(tenant)
