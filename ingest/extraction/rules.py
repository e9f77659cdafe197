"""A deterministic rule-based fact extractor: the offline default, no key, no network.

It reads sales-call transcripts ("Speaker: text" lines) or CRM free text and extracts
amounts with currency (as budget, deal amount or a competitor's quoted price), seat and
headcount numbers, dates (close, go-live, meeting), competitor mentions, deal-stage cues,
commitments ("we'll send…"), next steps and approvers. Same input, same facts, same order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal

from ingest.extraction import patterns as p
from ingest.extraction.values import Fact
from ingest.sources.llm.common import LLMResult
from ingest.sources.usage import Usage

MODEL = "rules-v1"


@dataclass(frozen=True)
class Sentence:
    speaker: str | None
    text: str


def split_sentences(text: str) -> Iterator[Sentence]:
    """Sentences with their speaker; lines without "Name:" continue the previous speaker."""
    speaker: str | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        match = p.SPEAKER_LINE.match(line)
        if match:
            speaker, line = match["speaker"].strip(), match["text"]
        for sentence in p.SENTENCE_END.split(line):
            if sentence.strip():
                yield Sentence(speaker, sentence.strip())


def normalize_amount(match: re.Match[str]) -> str:
    """`$1.2M` → `USD 1200000`, `48,000 euros` → `EUR 48000`, `$99.50` → `USD 99.50`."""
    number = Decimal((match["num"] or match["num2"]).replace(",", ""))
    multiplier = (match["mult"] or match["mult2"] or "").lower()
    value = number * p.MULTIPLIER.get(multiplier, 1)
    currency = p.CURRENCY[match["symbol"] or match["code"]]
    text = f"{value:.0f}" if value == value.to_integral_value() else f"{value:.2f}"
    return f"{currency} {text}"


def _dates(text: str) -> Iterator[str]:
    for match in p.ISO_DATE.finditer(text):
        yield match.group(0)
    for match in p.MONTH_DAY.finditer(text):
        month = p.MONTH_NUMBERS[match["month"][:3].lower()]
        day = int(match["day"])
        if not 1 <= day <= 31:
            continue
        if match["year"]:
            yield f"{match['year']}-{month:02d}-{day:02d}"
        else:
            yield f"{p.MONTH_NAMES[month - 1]} {day}"
    for match in p.QUARTER.finditer(text):
        label = f"Q{match['q']}" + (f" {match['year']}" if match["year"] else "")
        yield f"end of {label}" if match["end"] else label
    for match in p.PERIOD_END.finditer(text):
        yield f"end of {match['period']}"


def _clause(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip(" ,;:-—").rstrip(".")


class RuleExtractor:
    """Extract facts from text with regular expressions; see the module docstring."""

    def __init__(self, competitors: Sequence[str] = p.DEFAULT_COMPETITORS) -> None:
        self.competitors = tuple(competitors)
        self._competitor = re.compile(
            r"(?<![\w.])(" + "|".join(re.escape(name) for name in self.competitors) + r")(?![\w])",
            re.I,
        )
        self._canonical = {name.lower(): name for name in self.competitors}

    def extract(self, text: str, *, subject: str = "deal") -> LLMResult:
        """Facts as `{"facts": [...]}` in an LLMResult with zero-token usage."""
        facts: dict[tuple[str, str, str], Fact] = {}
        for sentence in split_sentences(text):
            for fact in self.sentence_facts(sentence, subject=subject):
                facts.setdefault((fact.subject, fact.predicate, fact.object), fact)
        data = {"facts": [fact.as_dict() for fact in facts.values()]}
        return LLMResult(
            data=data,
            usage=Usage(service="rules", model=MODEL, calls=1),
            model=MODEL,
            raw_text=json.dumps(data),
        )

    def sentence_facts(self, sentence: Sentence, *, subject: str) -> Iterator[Fact]:
        text = sentence.text
        competitors = [self._canonical[m.lower()] for m in self._competitor.findall(text)]
        yield from self._amounts(text, subject=subject, competitors=competitors)
        yield from self._counts(text, subject=subject)
        yield from self._date_facts(text, subject=subject)
        for name in competitors:
            yield Fact(subject, "competitor_mentioned", name, 0.9, text)
        for stage, cue in p.STAGES:
            if cue.search(text):
                yield Fact(subject, "deal_stage", stage, 0.6, text)
        yield from self._actions(text, speaker=sentence.speaker or subject, subject=subject)

    def _amounts(self, text: str, *, subject: str, competitors: list[str]) -> Iterator[Fact]:
        for match in p.AMOUNT.finditer(text):
            amount = normalize_amount(match)
            if p.BUDGET.search(text):
                yield Fact(subject, "budget", amount, 0.85, text)
            elif competitors:
                yield Fact(competitors[0], "quoted_price", amount, 0.7, text)
            elif p.PRICING.search(text):
                yield Fact(subject, "deal_amount", amount, 0.8, text)
            else:
                yield Fact(subject, "amount_mentioned", amount, 0.5, text)

    def _counts(self, text: str, *, subject: str) -> Iterator[Fact]:
        for match in p.COUNT.finditer(text):
            noun = match["noun"].lower()
            predicate = "seat_count" if noun in p.SEAT_NOUNS else "headcount"
            yield Fact(subject, predicate, match["num"].replace(",", ""), 0.8, text)

    def _date_facts(self, text: str, *, subject: str) -> Iterator[Fact]:
        kind = next((name for name, cue in p.DATE_KINDS if cue.search(text)), "date_mentioned")
        for date in _dates(text):
            yield Fact(subject, kind, date, 0.7, text)

    def _actions(self, text: str, *, speaker: str, subject: str) -> Iterator[Fact]:
        for match in p.COMMITMENT.finditer(text):
            yield Fact(speaker, "commitment", _clause(match["what"]), 0.8, text)
        for match in p.NEXT_STEP.finditer(text):
            yield Fact(subject, "next_step", _clause(match["what"] or match["what2"]), 0.75, text)
        for match in p.APPROVER.finditer(text):
            yield Fact(subject, "approver", match["role"], 0.8, text)
