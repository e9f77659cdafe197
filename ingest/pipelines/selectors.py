"""Reads of the pipelines' tables: keyword lists, connections (and the settings each client takes
from them, else from the environment), prices, facts and similar facts."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from django.db.models.signals import post_delete, post_save

from ingest.engine import lookup_hashes
from ingest.pipelines import sql as pipelines_sql
from ingest.pipelines.models import (
    Connection,
    ConnectionKind,
    Fact,
    FactEmbedding,
    KeywordList,
    Price,
)
from ingest.pipelines.pricing import PRICE_FIELDS, PriceRow
from ingest.pipelines.sql import WebhookConnection

ENV: Mapping[str, str] = os.environ

# How long a process keeps the tables an operator edits a few times a year (keyword lists,
# connections, prices) before reading them again. The process that saves or deletes a row
# (the admin, the services) drops its copies at once; the others see the edit within this.
CONFIG_CACHE_SECONDS = 30.0
PRICE_CACHE_SECONDS = CONFIG_CACHE_SECONDS
V = TypeVar("V")


class TimedCache(Generic[V]):
    """Values read from the database, kept per key for at most `seconds` in this process.

    `clear()` (from the tables' save and delete signals) also voids a read that was in flight
    when it was called, so a row saved in this process is never hidden by an older read that
    finished after the save.
    """

    def __init__(self, seconds: Callable[[], float]) -> None:
        self._seconds = seconds
        self._entries: dict[Hashable, tuple[float, V]] = {}
        self._generation = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, load: Callable[[], V]) -> V:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and time.monotonic() - entry[0] <= self._seconds():
                return entry[1]
            generation = self._generation
        read_at = time.monotonic()
        value = load()  # outside the lock: a slow read must not hold up the other threads
        with self._lock:
            if generation == self._generation:
                self._entries[key] = (read_at, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._generation += 1


@dataclass(frozen=True)
class GongConfig:
    base_url: str
    access_key: str
    secret: str
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class SalesforceConfig:
    login_url: str
    client_id: str
    client_secret: str
    refresh_token: str = ""
    organization_id: str = ""


@dataclass(frozen=True)
class LLMConfig:
    """`provider`: "rules" (offline default), "openai" (any OpenAI-compatible API), "anthropic",
    or "demo" (rules priced as the model would be, failing chosen keys once: `DemoExtractor` in
    ingest.workflows.providers)."""

    provider: str = "rules"
    base_url: str = ""
    api_key: str = ""
    model: str = ""
    service: str = ""
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


_keyword_lists: TimedCache[tuple[str, ...] | None] = TimedCache(lambda: CONFIG_CACHE_SECONDS)
_connections: TimedCache[Connection | None] = TimedCache(lambda: CONFIG_CACHE_SECONDS)


def keyword_list_get(*, tenant: str) -> list[str] | None:
    """The tenant's keywords, or None when it has no list (then nothing is prefiltered out).

    Read through a cache: every call's prefilter asked for the same list. An edit applies at
    once in the process that saved it and within CONFIG_CACHE_SECONDS elsewhere."""

    def load() -> tuple[str, ...] | None:
        row = KeywordList.objects.filter(tenant=tenant).values_list("keywords", flat=True).first()
        return None if row is None else tuple(str(k) for k in row)

    keywords = _keyword_lists.get(tenant, load)
    return None if keywords is None else list(keywords)


def _connection(tenant: str, kind: str) -> Connection | None:
    """The tenant's enabled connection row of a kind, through a cache as `keyword_list_get`'s
    (every extraction read its LLM connection). Callers only read the row."""
    return _connections.get(
        (tenant, kind), lambda: Connection.objects.filter(tenant=tenant, kind=kind, enabled=True).first()
    )


def connection_by_webhook_key(*, kind: str, key: str) -> Connection | None:
    """The enabled connection whose webhook key is `key`, found by its HMAC under any secret key
    (the key itself is only stored encrypted)."""
    if not key:
        return None
    return pipelines_sql.connection_by_webhook_hashes(kind=kind, hashes=lookup_hashes(key))


# (kind, sha256 of the webhook key) → the connection the last lookup found, per process
# (PostgreSQL only). Nothing here is trusted on its own: a webhook creates its instances under
# the entry's guard, which holds only while the row is unchanged, and any answer that no guarded
# statement confirmed is given again from a fresh lookup (`ingest/workflows/hooks.py`), so a
# disabled, re-keyed, re-tenanted or deleted connection is refused at its next post.
_KEPT_WEBHOOKS: dict[tuple[str, str], WebhookConnection] = {}
_KEPT_WEBHOOKS_MOST = 1024


def _kept_key(kind: str, key: str) -> tuple[str, str]:
    return kind, hashlib.sha256(key.encode()).hexdigest()


def webhook_connection_get(*, kind: str, key: str, kept: bool = True) -> tuple[WebhookConnection | None, bool]:
    """(the connection whose webhook key is `key` with its guard, whether it came from this
    process's keep rather than a lookup just now). `kept=False`: look it up, whatever is kept."""
    if not key:
        return None, False
    if kept and (found := _KEPT_WEBHOOKS.get(_kept_key(kind, key))) is not None:
        return found, True
    found = pipelines_sql.webhook_connection_by_hashes(kind=kind, hashes=lookup_hashes(key))
    if found is None or found.guard is None:
        _KEPT_WEBHOOKS.pop(_kept_key(kind, key), None)
        return found, False
    if len(_KEPT_WEBHOOKS) >= _KEPT_WEBHOOKS_MOST:
        _KEPT_WEBHOOKS.clear()
    _KEPT_WEBHOOKS[_kept_key(kind, key)] = found
    return found, False


def webhook_connection_forget(*, kind: str, key: str) -> None:
    """Drop what this process keeps for the webhook key `key` (its guard did not hold)."""
    _KEPT_WEBHOOKS.pop(_kept_key(kind, key), None)


def gong_config_get(*, tenant: str, base_url: str | None = None) -> GongConfig:
    """The tenant's Gong connection row, else GONG_BASE_URL / GONG_ACCESS_KEY / GONG_ACCESS_KEY_SECRET."""
    row = _connection(tenant, ConnectionKind.GONG)
    if row is not None:
        return GongConfig(base_url or row.base_url or "https://api.gong.io", row.key, row.secret, dict(row.options))
    return GongConfig(
        base_url or ENV.get("GONG_BASE_URL", "https://api.gong.io"),
        ENV.get("GONG_ACCESS_KEY", ""),
        ENV.get("GONG_ACCESS_KEY_SECRET", ""),
    )


def salesforce_config_get(*, tenant: str, login_url: str | None = None) -> SalesforceConfig:
    """The tenant's Salesforce connection row, else SALESFORCE_LOGIN_URL / _CLIENT_ID / _CLIENT_SECRET /
    _REFRESH_TOKEN."""
    row = _connection(tenant, ConnectionKind.SALESFORCE)
    if row is not None:
        return SalesforceConfig(
            login_url or row.base_url or "https://login.salesforce.com",
            row.key,
            row.secret,
            row.refresh_token,
            str(row.options.get("organization_id", "")),
        )
    return SalesforceConfig(
        login_url or ENV.get("SALESFORCE_LOGIN_URL", "https://login.salesforce.com"),
        ENV.get("SALESFORCE_CLIENT_ID", ""),
        ENV.get("SALESFORCE_CLIENT_SECRET", ""),
        ENV.get("SALESFORCE_REFRESH_TOKEN", ""),
    )


@dataclass(frozen=True)
class StoredToken:
    access_token: str
    instance_url: str


def connection_token_get(*, tenant: str, kind: str, now: datetime) -> StoredToken | None:
    """The access token a process kept for the tenant's connection, while it is still valid."""
    row = (
        Connection.objects.filter(tenant=tenant, kind=kind, enabled=True)
        .values_list("access_token", "instance_url", "access_token_expires_at")
        .first()
    )
    if row is None or not row[0] or row[2] is None or row[2] <= now:
        return None
    return StoredToken(access_token=row[0], instance_url=row[1])


def llm_config_get(*, tenant: str) -> LLMConfig:
    """The tenant's LLM row, else RUNLEDGER_LLM_PROVIDER / _BASE_URL / _API_KEY / _MODEL / _SERVICE,
    else the offline rule extractor."""
    row = _connection(tenant, ConnectionKind.LLM)
    if row is not None:
        opts = dict(row.options)
        return LLMConfig(
            provider=str(opts.get("provider", "openai")),
            base_url=row.base_url,
            api_key=row.secret,
            model=str(opts.get("model", "")),
            service=str(opts.get("service", "")),
            options=opts,
        )
    return LLMConfig(
        provider=ENV.get("RUNLEDGER_LLM_PROVIDER", "rules"),
        base_url=ENV.get("RUNLEDGER_LLM_BASE_URL", ""),
        api_key=ENV.get("RUNLEDGER_LLM_API_KEY", ""),
        model=ENV.get("RUNLEDGER_LLM_MODEL", ""),
        service=ENV.get("RUNLEDGER_LLM_SERVICE", ""),
    )


@dataclass(frozen=True)
class DataForSEOConfig:
    login: str
    password: str
    base_url: str = "https://api.dataforseo.com"


@dataclass(frozen=True)
class ZenRowsConfig:
    api_key: str
    base_url: str = "https://api.zenrows.com/v1/"


def dataforseo_config_get(*, tenant: str) -> DataForSEOConfig:
    """The tenant's DataForSEO connection row (login in `key`, password in `secret`), else
    RUNLEDGER_DATAFORSEO_LOGIN / _PASSWORD / _BASE_URL. An empty login: not configured."""
    row = _connection(tenant, ConnectionKind.DATAFORSEO)
    if row is not None:
        return DataForSEOConfig(row.key, row.secret, row.base_url or DataForSEOConfig.base_url)
    return DataForSEOConfig(
        ENV.get("RUNLEDGER_DATAFORSEO_LOGIN", ""),
        ENV.get("RUNLEDGER_DATAFORSEO_PASSWORD", ""),
        ENV.get("RUNLEDGER_DATAFORSEO_BASE_URL", "") or DataForSEOConfig.base_url,
    )


def zenrows_config_get(*, tenant: str) -> ZenRowsConfig:
    """The tenant's ZenRows connection row (API key in `secret`), else RUNLEDGER_ZENROWS_API_KEY /
    _BASE_URL. An empty key: no ZenRows (the page fetch stops after the free native fetch)."""
    row = _connection(tenant, ConnectionKind.ZENROWS)
    if row is not None:
        return ZenRowsConfig(row.secret, row.base_url or ZenRowsConfig.base_url)
    return ZenRowsConfig(
        ENV.get("RUNLEDGER_ZENROWS_API_KEY", ""), ENV.get("RUNLEDGER_ZENROWS_BASE_URL", "") or ZenRowsConfig.base_url
    )


PULLED_KINDS = (ConnectionKind.GONG, ConnectionKind.SALESFORCE)
PULL_OPTION = "reconcile"  # a connection with {"reconcile": false} is not pulled on a schedule


def _pulled(options: Mapping[str, Any] | None) -> bool:
    return (options or {}).get(PULL_OPTION) is not False


@dataclass(frozen=True)
class PulledConnection:
    """A Gong or Salesforce connection the scheduled pull reads (`connections-reconcile`)."""

    id: int
    tenant: str
    kind: str
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


def pulled_connections(*, tenant: str | None = None) -> list[PulledConnection]:
    """The enabled Gong and Salesforce connections not turned off for pulls (of `tenant`; None:
    every tenant's), read now: a pull must not start from a connection just disabled."""
    qs = Connection.objects.filter(kind__in=PULLED_KINDS, enabled=True)
    if tenant is not None:
        qs = qs.filter(tenant=tenant)
    return [
        PulledConnection(row["id"], row["tenant"], row["kind"], dict(row["options"] or {}))
        for row in qs.order_by("tenant", "kind").values("id", "tenant", "kind", "options")
        if _pulled(row["options"])
    ]


@dataclass(frozen=True)
class CursorRow:
    """A connection's pull as the console shows it; `cursor` None: never pulled to the end."""

    tenant: str
    kind: str
    enabled: bool
    pulled: bool  # False: the connection's options turn its pulls off
    cursor: datetime | None
    lag_seconds: float | None
    last_pull_at: datetime | None
    last_success_at: datetime | None
    listed: int
    started: int
    last_error: str
    last_error_at: datetime | None
    pulling: bool


def connection_cursor_list(*, tenants: Collection[str], now: datetime) -> list[CursorRow]:
    """Every Gong and Salesforce connection of `tenants` with how far its pull has reached."""
    rows = (
        Connection.objects.filter(kind__in=PULLED_KINDS, tenant__in=list(tenants))
        .select_related("pull_cursor")
        .order_by("tenant", "kind")
        .defer("key", "secret", "refresh_token", "webhook_key", "access_token")
    )  # never decrypted here
    found = []
    for row in rows:
        c = getattr(row, "pull_cursor", None)
        cursor = c.cursor if c else None
        found.append(
            CursorRow(
                tenant=row.tenant,
                kind=row.kind,
                enabled=row.enabled,
                pulled=_pulled(row.options),
                cursor=cursor,
                lag_seconds=None if cursor is None else max(0.0, (now - cursor).total_seconds()),
                last_pull_at=c.last_pull_at if c else None,
                last_success_at=c.last_success_at if c else None,
                listed=c.listed if c else 0,
                started=c.started if c else 0,
                last_error=c.last_error if c else "",
                last_error_at=c.last_error_at if c else None,
                pulling=bool(c and c.holder and c.held_until and c.held_until > now),
            )
        )
    return found


def price_rows() -> list[PriceRow]:
    """Every row of the price table as pure `PriceRow`s (empty when nobody edited prices)."""
    return [PriceRow.from_row(row) for row in Price.objects.values(*PRICE_FIELDS)]


_prices: TimedCache[list[PriceRow]] = TimedCache(lambda: PRICE_CACHE_SECONDS)


def price_rows_cached() -> list[PriceRow]:
    """`price_rows`, read again at most every PRICE_CACHE_SECONDS in a process.

    Every extraction priced the table twice (its reservation and its cost), re-reading a
    table that changes a few times a year. Caching the rows, not a resolved price, keeps the
    effective dates exact: `price_for` picks the row in force at each usage's own time, so a
    row dated ahead takes over at its moment from the cache. What the cache delays is an edit
    reaching other processes, by at most PRICE_CACHE_SECONDS; the process that saves or
    deletes a price row (the admin, `price_upsert`) drops its copy at once (`_edited`).
    """
    return _prices.get(None, price_rows)


def price_cache_clear() -> None:
    _prices.clear()


def config_cache_clear() -> None:
    """Forget the cached keyword lists, connections and prices of this process."""
    _keyword_lists.clear()
    _connections.clear()
    _prices.clear()


def _edited(sender: type, **kwargs: Any) -> None:
    # A signal rather than a call in each writer: the admin saves these rows through the ORM,
    # and a cache is not business logic. Queryset.update() and bulk_create() send no signal;
    # nothing writes these tables that way (an edit made so is seen after the cache's limit).
    caches: dict[type, TimedCache[Any]] = {Price: _prices, KeywordList: _keyword_lists, Connection: _connections}
    caches[sender].clear()


for _model in (Price, KeywordList, Connection):
    post_save.connect(_edited, sender=_model, dispatch_uid=f"ingest.config_cache.{_model.__name__}")
    post_delete.connect(_edited, sender=_model, dispatch_uid=f"ingest.config_cache.{_model.__name__}")


def fact_list(*, tenant: str, valid: bool | None = True, source_ref: str | None = None) -> list[Fact]:
    qs = Fact.objects.filter(tenant=tenant)
    if valid is not None:
        qs = qs.filter(valid=valid)
    if source_ref is not None:
        qs = qs.filter(source_ref=source_ref)
    return list(qs.order_by("subject", "predicate", "observed_at", "id"))


@dataclass(frozen=True)
class SimilarFact:
    fact_id: str
    score: float
    text: str


def fact_similar(*, tenant: str, vector: list[float], limit: int = 10, valid_only: bool = True) -> list[SimilarFact]:
    """The tenant's facts nearest to `vector` by cosine similarity, best first.

    Brute force over every stored vector of the tenant with numpy: a tenant holds thousands to
    tens of thousands of facts, which is milliseconds this way. Past a few hundred thousand,
    move to pgvector (an HNSW index) behind this same function.
    """
    qs = FactEmbedding.objects.filter(tenant=tenant, dim=len(vector))
    if valid_only:
        qs = qs.filter(fact__valid=True)
    rows = list(qs.values_list("fact_id", "vector", "text"))
    if not rows:
        return []
    import numpy as np  # here, not at the top: a worker's start would pay ~0.15 s for it (bench/worker_boot.py)

    matrix = np.stack([np.frombuffer(bytes(v), dtype="<f4") for _, v, _ in rows])
    query = np.asarray(vector, dtype="<f4")
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(query) or 1.0)
    scores = (matrix @ query) / np.where(norms == 0, 1.0, norms)
    order = np.argsort(-scores)[:limit]
    return [SimilarFact(rows[i][0], float(scores[i]), rows[i][2]) for i in order]
