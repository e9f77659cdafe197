"""Stage 4 of url-classify: the LLM verification prompt, with the taxonomy as its constraints,
and the reading of its answer. Pure: no IO (the workflow sends it through an LLM client)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ingest.classify.result import AXIS_NAMES, Candidate, candidate
from ingest.classify.taxonomy import AXES, MODIFIERS
from ingest.sources.llm import ChatMessage

__all__ = ["LLMAnswerInvalid", "MAX_OUTPUT_TOKENS", "SYSTEM_PROMPT", "llm_answer", "llm_messages"]

MAX_OUTPUT_TOKENS = 300

SYSTEM_PROMPT = (
    "You verify the classification of a URL for an SEO backlink and ranking analysis "
    "(url-classify, stage 4). Answer with one JSON object with the keys "
    + ", ".join(AXIS_NAMES)
    + ", modifiers (a list) and confidence (0-100: how sure you are of domain_type and page_type). "
    "Use only these values; use null for an axis you cannot tell.\n"
    + "\n".join(f"{axis}: {', '.join(sorted(AXES[axis]))}" for axis in AXIS_NAMES)
    + f"\nmodifiers: {', '.join(sorted(MODIFIERS))}"
)


class LLMAnswerInvalid(ValueError):
    """The model's answer gives neither a domain type nor a page type from the taxonomy."""


def llm_messages(
    url: str, *, partial: Candidate | None, signals: Mapping[str, Any] | None, round_no: int
) -> list[ChatMessage]:
    """The prompt for one round: the URL, what the cheaper stages proposed, the page's signals."""
    facts: dict[str, Any] = {"url": url, "round": round_no}
    if partial is not None:
        facts["proposed"] = {**partial.labels, "modifiers": list(partial.modifiers),
                             "confidence": partial.confidence}  # fmt: skip
    if signals:
        facts["page"] = {k: signals[k] for k in ("title", "h1", "description", "word_count", "has_pricing",
                                                 "has_login", "has_affiliate") if k in signals}  # fmt: skip
    return [
        ChatMessage(role="system", content=SYSTEM_PROMPT),
        ChatMessage(role="user", content=json.dumps(facts, sort_keys=True)),
    ]


def llm_answer(data: Mapping[str, Any]) -> Candidate:
    """The model's answer as a candidate: values outside the taxonomy are dropped, so the answer
    stays within its constraints; an answer left with neither domain nor page type is invalid."""
    labels = {axis: data.get(axis) for axis in AXIS_NAMES}
    modifiers = data.get("modifiers") if isinstance(data.get("modifiers"), list) else []
    try:
        confidence = float(data.get("confidence", 0))
    except (TypeError, ValueError):
        confidence = 0.0
    proposed = candidate(confidence, labels, [str(m) for m in modifiers or ()])
    if not (proposed.get("domain_type") or proposed.get("page_type")):
        shown = json.dumps(dict(data))[:200]
        raise LLMAnswerInvalid(f"the LLM's answer names no domain_type or page_type from the taxonomy: {shown}")
    return proposed
