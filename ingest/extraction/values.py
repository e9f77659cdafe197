"""The values extraction produces: `Fact`, read out of an `LLMResult` (what any extractor returns)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from ingest.sources.llm.common import LLMResult


class FactDict(TypedDict):
    subject: str
    predicate: str
    object: str
    confidence: float
    evidence: str


class FactsDict(TypedDict):
    facts: list[FactDict]


@dataclass(frozen=True)
class Fact:
    subject: str
    predicate: str
    object: str
    confidence: float
    evidence: str = ""

    def key(self, source: str) -> str:
        """Deterministic id: the same fact from the same source gets the same id, so a replay upserts."""
        text = "|".join((source, self.subject, self.predicate, self.object)).lower()
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def as_dict(self) -> FactDict:
        return FactDict(
            subject=self.subject,
            predicate=self.predicate,
            object=self.object,
            confidence=self.confidence,
            evidence=self.evidence,
        )


class FactsMalformed(ValueError):
    """The extractor's output does not hold a `facts` list; a new attempt may do better."""

    retryable = True
    retry_after: float | None = None

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__doc__)


def _fact(item: Mapping[str, Any]) -> Fact | None:
    parts = [str(item.get(key) or "").strip() for key in ("subject", "predicate", "object")]
    if not all(parts):
        return None
    try:
        confidence = float(item.get("confidence", 0.5))
    except (TypeError, ValueError):
        confidence = 0.5
    return Fact(
        subject=parts[0],
        predicate=parts[1].lower().replace(" ", "_"),
        object=parts[2],
        confidence=min(max(confidence, 0.0), 1.0),
        evidence=str(item.get("evidence") or "").strip(),
    )


def facts_from_result(result: LLMResult) -> list[Fact]:
    """The facts in `result.data`; entries missing subject, predicate or object are dropped.

    Raises FactsMalformed (retryable) when there is no `facts` list at all, which is what a
    model that ignored the requested shape produces.
    """
    facts = result.data.get("facts")
    if not isinstance(facts, list):
        raise FactsMalformed(
            f"model {result.model!r} answered without a 'facts' list "
            f"(keys: {sorted(result.data)}); retry the extraction step"
        )
    parsed = (_fact(item) for item in facts if isinstance(item, Mapping))
    unique: dict[tuple[str, str, str], Fact] = {}
    for fact in parsed:
        if fact is not None:
            unique.setdefault((fact.subject, fact.predicate, fact.object), fact)
    return list(unique.values())
