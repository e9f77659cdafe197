"""What each stage of url-classify proposes (a `Candidate`), how proposals combine, and the
ClassificationResult the workflow outputs. Pure: no IO.

Every stage proposes labels on the five axes, modifiers and a confidence (0-100). The pipeline
keeps the strongest proposal so far: it wins every axis it sets, a weaker one fills only the
axes it leaves empty, modifiers are the union. On a tie the later stage wins (it saw more).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypedDict

from ingest.classify.matcher import RulesResult
from ingest.classify.signals import ContentSignals
from ingest.classify.taxonomy import AXES, MODIFIERS

__all__ = [
    "AXIS_NAMES", "Candidate", "ClassificationResult", "Neighbour", "classification_result",
    "combine", "content_candidate", "rules_candidate", "similarity_candidate",
]  # fmt: skip

# A neighbours' vote below this is noise: it proposes nothing (not even the axes it would fill).
SIMILARITY_MIN_CONFIDENCE = 50
AXIS_NAMES: tuple[str, ...] = ("domain_type", "page_type", "tactic_type", "channel_bucket", "media_type")
DOMAIN_AXES: tuple[str, ...] = ("domain_type", "tactic_type", "channel_bucket", "media_type")


class ClassificationResult(TypedDict, total=False):
    """The url-classify workflow's output (JSON): a label per axis, modifiers, confidence, the
    stage that decided, and what it cost."""

    url: str
    url_id: int | None
    confidence: int  # 0-100
    domain_type: str | None
    page_type: str | None
    tactic_type: str | None
    channel_bucket: str | None
    media_type: str | None
    modifiers: list[str]
    classification_source: str  # the stage that decided: cache, rules, similarity, content, llm
    stages_run: list[str]  # every stage executed, in order
    round: int  # LLM rounds used
    cost_usd: float  # what this URL's stages spent (the api_costs rows of its instance)
    fetch_method: str | None  # native, zenrows_basic, zenrows_premium
    content_signals: dict[str, Any] | None
    duration_ms: int | None  # the run's wall time from its start to its result (None: not measured)


@dataclass(frozen=True)
class Candidate:
    confidence: int
    labels: Mapping[str, str] = field(default_factory=dict)  # axis -> value, set axes only
    modifiers: tuple[str, ...] = ()

    def get(self, axis: str) -> str | None:
        return self.labels.get(axis)

    def as_dict(self) -> dict[str, Any]:
        return {"confidence": self.confidence, "labels": dict(self.labels), "modifiers": list(self.modifiers)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Candidate:
        return cls(int(data["confidence"]), dict(data.get("labels") or {}), tuple(data.get("modifiers") or ()))


def _valid(labels: Mapping[str, Any]) -> dict[str, str]:
    return {axis: str(value) for axis, value in labels.items() if axis in AXES and value in AXES[axis]}


def candidate(confidence: float, labels: Mapping[str, Any], modifiers: Sequence[str] = ()) -> Candidate:
    """A candidate with only taxonomy values kept and the confidence clamped to 0-100."""
    kept = sorted({m for m in modifiers if m in MODIFIERS})
    return Candidate(max(0, min(100, round(confidence))), _valid(labels), tuple(kept))


def combine(current: Candidate | None, new: Candidate | None) -> Candidate | None:
    if current is None or new is None:
        return new or current
    strong, weak = (new, current) if new.confidence >= current.confidence else (current, new)
    labels = {**weak.labels, **strong.labels}
    return Candidate(strong.confidence, labels, tuple(sorted({*strong.modifiers, *weak.modifiers})))


def rules_candidate(result: RulesResult) -> Candidate:
    labels = {axis: getattr(result, axis) for axis in AXIS_NAMES if getattr(result, axis)}
    return candidate(result.confidence, labels, result.modifiers)


@dataclass(frozen=True)
class Neighbour:
    """A classified URL near the one being classified: cosine `score` in [-1, 1]."""

    url: str
    score: float
    labels: Mapping[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"url": self.url, "score": round(self.score, 4), "labels": dict(self.labels)}


def similarity_candidate(neighbours: Sequence[Neighbour]) -> Candidate | None:
    """The neighbours' score-weighted vote on each axis. Confidence: the best score among the
    neighbours agreeing on the domain type, times their share of the weight — three close
    neighbours that agree give about their score, a split vote much less. None when no
    neighbour is similar or the vote is under SIMILARITY_MIN_CONFIDENCE."""
    voters = [n for n in neighbours if n.score > 0]
    if not voters:
        return None
    total = sum(n.score for n in voters)
    labels: dict[str, str] = {}
    for axis in AXIS_NAMES:
        weights: dict[str, float] = {}
        for n in voters:
            value = n.labels.get(axis)
            if value:
                weights[str(value)] = weights.get(str(value), 0.0) + n.score
        if weights:
            labels[axis] = max(sorted(weights), key=lambda v: weights[v])
    winner = labels.get("domain_type")
    agreeing = [n for n in voters if n.labels.get("domain_type") == winner]
    share = sum(n.score for n in agreeing) / total
    best = max(n.score for n in agreeing)
    if 100 * best * share < SIMILARITY_MIN_CONFIDENCE:
        return None
    modifiers = [m for n in agreeing for m in n.labels.get("modifiers") or ()]
    return candidate(100 * best * share, labels, sorted(set(modifiers)))


def content_candidate(signals: ContentSignals, prior: Candidate | None) -> Candidate:
    """What the page itself says. A login form, a price list or affiliate links are strong
    evidence of the page and domain type; the length of the text weaker evidence of an
    article. Axes the page says nothing about keep the prior's values and confidence."""
    labels: dict[str, str] = {}
    modifiers: list[str] = []
    prior_page = prior.get("page_type") if prior else None
    prior_domain = prior.get("domain_type") if prior else None
    prior_conf = prior.confidence if prior else 0
    if signals.has_login:
        labels["page_type"], page_conf = "login", 85
        modifiers.append("auth_wall")
    elif signals.has_pricing:
        labels["page_type"], page_conf = "pricing", 85
    elif signals.has_affiliate:
        labels["page_type"], page_conf = "review", 75
    elif signals.word_count >= 600:
        labels["page_type"], page_conf = prior_page or "article", 75
    elif signals.word_count >= 250:
        labels["page_type"], page_conf = prior_page or "article", 65
    else:
        labels["page_type"], page_conf = prior_page or "landing", 55
    if signals.has_pricing or signals.has_login:
        labels["domain_type"], domain_conf = "saas", 75
        labels["tactic_type"] = "content"
    elif signals.has_affiliate:
        labels["domain_type"], domain_conf = "review_site", 70
        labels["tactic_type"] = "affiliate"
    elif prior_domain:
        labels["domain_type"], domain_conf = prior_domain, prior_conf
    elif signals.word_count >= 600:
        labels["domain_type"], domain_conf = "blog", 60
    else:
        domain_conf = 0
    if signals.has_affiliate:
        modifiers.append("affiliate")
    if signals.word_count >= 250:
        labels["media_type"] = "text"
    return candidate((domain_conf + page_conf) / 2, labels, modifiers)


def classification_result(
    *,
    url: str,
    url_id: int | None,
    decided: Candidate | None,
    source: str,
    stages_run: Sequence[str],
    rounds: int,
    cost: Decimal,
    fetch_method: str | None,
    signals: Mapping[str, Any] | None,
) -> ClassificationResult:
    labels = decided.labels if decided else {}
    result = ClassificationResult(
        url=url, url_id=url_id, confidence=decided.confidence if decided else 0,
        modifiers=list(decided.modifiers) if decided else [], classification_source=source,
        stages_run=list(stages_run), round=rounds, cost_usd=float(cost), fetch_method=fetch_method,
        content_signals=dict(signals) if signals is not None else None,
    )  # fmt: skip
    for axis in AXIS_NAMES:
        result[axis] = labels.get(axis)  # type: ignore[literal-required]
    return result
