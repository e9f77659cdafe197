"""Regular expressions and vocabularies for the rule-based extractor."""

from __future__ import annotations

import re

DEFAULT_COMPETITORS: tuple[str, ...] = (
    "Clari",
    "Chorus",
    "Outreach",
    "Salesloft",
    "HubSpot",
    "ZoomInfo",
    "Avoma",
    "People.ai",
    "Highspot",
    "Seismic",
)

_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_MULTIPLIER = r"k|K|mm|MM|m|M|million|thousand|billion|bn"

AMOUNT = re.compile(
    rf"(?P<symbol>[$€£])\s?(?P<num>{_NUMBER})(?:\s?(?P<mult>{_MULTIPLIER})\b)?"
    rf"|(?<![\w$€£.,])(?P<num2>{_NUMBER})\s?(?:(?P<mult2>{_MULTIPLIER})\s?)?"
    r"(?P<code>USD|EUR|GBP|dollars|euros|pounds)\b"
)
CURRENCY = {
    "$": "USD",
    "€": "EUR",
    "£": "GBP",
    "USD": "USD",
    "EUR": "EUR",
    "GBP": "GBP",
    "dollars": "USD",
    "euros": "EUR",
    "pounds": "GBP",
}
MULTIPLIER = {
    "k": 1_000,
    "thousand": 1_000,
    "m": 1_000_000,
    "mm": 1_000_000,
    "million": 1_000_000,
    "billion": 1_000_000_000,
    "bn": 1_000_000_000,
}

COUNT = re.compile(
    r"(?<![\w$€£.,])(?P<num>\d{1,3}(?:,\d{3})+|\d+)\s+(?:[a-z][\w-]*\s+)?"
    r"(?P<noun>seats|licen[cs]es|users|employees|people|reps|agents|engineers|sellers|SDRs|AEs)\b"
)
SEAT_NOUNS = frozenset({"seats", "licenses", "licences", "users"})

_MONTH = (
    r"Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?"
)
MONTH_DAY = re.compile(rf"\b(?P<month>{_MONTH})\.?\s+(?P<day>[0-3]?\d)(?:st|nd|rd|th)?\b(?:,?\s+(?P<year>20\d\d)\b)?")
ISO_DATE = re.compile(r"\b(?P<year>20\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b")
QUARTER = re.compile(r"\b(?P<end>end of\s+)?Q(?P<q>[1-4])(?:\s+(?P<year>20\d\d))?\b")
PERIOD_END = re.compile(r"\bend of (?:the )?(?P<period>month|quarter|year)\b")
MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
MONTH_NUMBERS = {name[:3].lower(): index for index, name in enumerate(MONTH_NAMES, 1)}

# Which kind of date a sentence talks about, first match wins.
DATE_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("go_live_date", re.compile(r"\b(go[- ]live|launch|roll ?out|kick ?off|onboard)", re.I)),
    ("close_date", re.compile(r"\b(sign|close|decision|contract|purchase|PO\b|renewal)", re.I)),
    ("meeting_date", re.compile(r"\b(meet|call|review|demo|session|workshop|sync)", re.I)),
)
BUDGET = re.compile(r"\bbudget", re.I)
PRICING = re.compile(
    r"\b(price|pricing|quote|quoted|cost|contract|deal|annual|per year|ARR|proposal|total)\b",
    re.I,
)

# (stage as Salesforce names it, cue); the most advanced stages first.
STAGES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Closed Won", re.compile(r"\b(countersigned|closed[- ]won|signed the (contract|order form))\b", re.I)),
    ("Closed Lost", re.compile(r"\b(closed[- ]lost|went with another vendor|decided to go with another)\b", re.I)),
    ("Negotiation/Review", re.compile(r"\b(redlines?|legal review|procurement|MSA|negotiat\w*)\b", re.I)),
    ("Proposal/Price Quote", re.compile(r"\b(proposal|order form|price quote)\b", re.I)),
    ("Id. Decision Makers", re.compile(r"\b(decision makers?|buying committee|economic buyer)\b", re.I)),
    ("Value Proposition", re.compile(r"\b(pilot|proof of concept|POC|trial)\b")),
    ("Needs Analysis", re.compile(r"\b(requirements|use cases?|pain points?)\b", re.I)),
)  # fmt: skip

COMMITMENT = re.compile(
    r"\b(?:I|[Ww]e)(?:'ll| will|'re going to| are going to|'m going to| am going to)\s+"
    r"(?P<what>(?:send|share|follow up|schedule|set up|get|loop in|introduce|review|prepare|"
    r"provide|deliver|draft|book|confirm|check|update|circle back)\b[^.!?]*)"
)
NEXT_STEP = re.compile(
    r"\b[Nn]ext steps?\s+(?:is|are|will be|would be)?\s*:?\s*(?P<what>[^.!?]+)"
    r"|\b[Ll]et'?s\s+(?P<what2>(?:schedule|set up|book|meet|reconvene|plan|regroup)\b[^.!?]*)"
)
APPROVER = re.compile(
    r"\b(?:[Oo]ur|[Tt]he|[Mm]y)\s+(?P<role>CFO|CEO|CRO|COO|CTO|CIO|VP of [A-Z]\w+|[Hh]ead of [A-Z]?\w+)"
    r"\s+(?:needs to|has to|will need to|will|must)\s+(?:sign off|approve)"
)

SPEAKER_LINE = re.compile(r"^(?P<speaker>[A-Z][^:\n]{0,79}):\s+(?P<text>\S.*)$")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'$€£0-9])")
