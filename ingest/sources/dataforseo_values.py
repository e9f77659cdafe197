"""DataForSEO v3 answers as typed values: one `from_json` per endpoint's result and item.

Pure parsing, no IO. Only the fields the RankDisco pipelines use are kept; a missing or null
field becomes None (DataForSEO sends null for unknown ranks and scores).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class Backlink:
    url_from: str
    url_to: str
    domain_from: str
    anchor: str | None
    dofollow: bool
    domain_from_rank: int | None
    page_from_rank: int | None
    spam_score: int | None
    first_seen: str | None
    last_seen: str | None
    is_lost: bool

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> Backlink:
        return cls(
            url_from=str(item["url_from"]), url_to=str(item["url_to"]),
            domain_from=str(item.get("domain_from") or ""), anchor=_str(item.get("anchor")),
            dofollow=bool(item.get("dofollow")), domain_from_rank=_int(item.get("domain_from_rank")),
            page_from_rank=_int(item.get("page_from_rank")),
            spam_score=_int(item.get("backlink_spam_score")),
            first_seen=_str(item.get("first_seen")), last_seen=_str(item.get("last_seen")),
            is_lost=bool(item.get("is_lost")),
        )  # fmt: skip


@dataclass(frozen=True)
class ReferringDomain:
    domain: str
    rank: int | None
    backlinks: int
    referring_pages: int
    spam_score: int | None
    first_seen: str | None

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> ReferringDomain:
        return cls(
            domain=str(item["domain"]), rank=_int(item.get("rank")),
            backlinks=int(item.get("backlinks") or 0),
            referring_pages=int(item.get("referring_pages") or 0),
            spam_score=_int(item.get("backlinks_spam_score")),
            first_seen=_str(item.get("first_seen")),
        )  # fmt: skip


@dataclass(frozen=True)
class RankedKeyword:
    keyword: str
    search_volume: int | None
    cpc: float | None
    competition: float | None
    serp_type: str
    rank_group: int | None
    rank_absolute: int | None
    url: str | None
    etv: float | None

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> RankedKeyword:
        data = item.get("keyword_data") or {}
        info = data.get("keyword_info") or {}
        serp = (item.get("ranked_serp_element") or {}).get("serp_item") or {}
        return cls(
            keyword=str(data["keyword"]), search_volume=_int(info.get("search_volume")),
            cpc=_float(info.get("cpc")), competition=_float(info.get("competition")),
            serp_type=str(serp.get("type") or ""), rank_group=_int(serp.get("rank_group")),
            rank_absolute=_int(serp.get("rank_absolute")), url=_str(serp.get("url")),
            etv=_float(serp.get("etv")),
        )  # fmt: skip


@dataclass(frozen=True)
class SpamScore:
    target: str
    spam_score: int | None

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> SpamScore:
        return cls(target=str(item["target"]), spam_score=_int(item.get("spam_score")))


@dataclass(frozen=True)
class Listing(Generic[T]):
    """One live task's result: the items returned and how many exist in total."""

    target: str
    total_count: int
    items_count: int
    items: tuple[T, ...]


def first_result(task: Mapping[str, Any]) -> Mapping[str, Any]:
    """A live task's single result object; empty when DataForSEO found nothing (result null)."""
    results = task.get("result") or []
    return dict(results[0]) if results else {}


def items_count(result: Mapping[str, Any]) -> int:
    count = result.get("items_count")
    return int(count) if count is not None else len(result.get("items") or [])


def listing(task: Mapping[str, Any], *, target: str, parse: Callable[[Mapping[str, Any]], T]) -> Listing[T]:
    result = first_result(task)
    items = tuple(parse(item) for item in result.get("items") or [])
    return Listing(
        target=str(result.get("target") or target),
        total_count=int(result.get("total_count") or len(items)),
        items_count=items_count(result),
        items=items,
    )
