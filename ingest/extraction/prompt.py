"""The LLM extraction prompt and an extractor that sends it through any LLM client."""

from __future__ import annotations

from ingest.sources.llm import ChatMessage, LLMClient, LLMResult

# Stable text first, so providers with prefix caching (OpenAI, DeepSeek) bill it as cached.
SYSTEM_PROMPT = """You extract facts about a B2B sales deal from a sales-call transcript or CRM notes.
Return JSON only, exactly this shape:
{"facts": [{"subject": str, "predicate": str, "object": str, "confidence": number, "evidence": str}]}
Rules:
- subject: the account, a named person, or a competitor the fact is about.
- predicate: one of budget, deal_amount, quoted_price, amount_mentioned, seat_count, headcount,
  close_date, go_live_date, meeting_date, date_mentioned, competitor_mentioned, deal_stage,
  commitment, next_step, approver.
- object: the value, normalised: amounts as "USD 48000", dates as YYYY-MM-DD when the year is
  known, stages as Salesforce names them ("Negotiation/Review"), commitments as a short clause.
- confidence: 0 to 1, how clearly the text states the fact.
- evidence: the sentence the fact comes from, quoted verbatim.
- Only facts the text states; no guesses. If there are none, return {"facts": []}."""


def extraction_messages(text: str, *, subject: str, source: str = "call transcript") -> list[ChatMessage]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Account: {subject}\nSource: {source}\n\n{text}"},
    ]


class LLMFactExtractor:
    """Fact extraction through an LLM client (`OpenAIChatClient`, `AnthropicClient`)."""

    def __init__(self, client: LLMClient, *, max_tokens: int | None = 2048) -> None:
        self.client = client
        self.max_tokens = max_tokens

    def extract(self, text: str, *, subject: str = "deal", source: str = "call transcript") -> LLMResult:
        messages = extraction_messages(text, subject=subject, source=source)
        return self.client.complete_json(messages, max_tokens=self.max_tokens)
