"""Fact extraction from call transcripts and CRM free text (pure code, no IO).

`RuleExtractor` is the offline default; `LLMFactExtractor` wraps an LLM client from
`ingest.sources.llm`. Both return an `LLMResult` (`ingest.sources.llm`) whose data is `{"facts": [...]}`.
"""

from ingest.extraction.values import Fact, FactsMalformed, facts_from_result

__all__ = ["Fact", "FactsMalformed", "facts_from_result"]
