"""Where Django looks for the app `ingest`'s models: the pipelines' tables, defined in
`ingest.pipelines.models` (import them from there; this module exists for Django alone)."""

from __future__ import annotations

from ingest.pipelines.models import (
    Connection,
    Fact,
    FactEmbedding,
    FactHead,
    KeywordList,
    Price,
    SignalEvaluation,
)

__all__ = ["Connection", "Fact", "FactEmbedding", "FactHead", "KeywordList", "Price", "SignalEvaluation"]
