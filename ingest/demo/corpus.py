"""Synthetic sales calls and Salesforce opportunities, deterministic from a seed.

Used by the local fake Gong and Salesforce servers and by the demo data. Transcripts have
several speakers and mention amounts, dates, competitors, stages and commitments, so the
rule-based extractor and an LLM both find facts in them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

SELLER = "Northwind Analytics"
ACCOUNTS = (
    ("Acme Logistics", "Transportation"), ("Globex Health", "Healthcare"),
    ("Initech", "Technology"), ("Umbrella Retail", "Retail"), ("Hooli", "Technology"),
    ("Stark Freight", "Transportation"), ("Wayne Media", "Media"),
    ("Soylent Foods", "Consumer Goods"), ("Cyberdyne Systems", "Manufacturing"),
    ("Tyrell Biotech", "Biotechnology"),
)  # fmt: skip
REPS = (("Maya Chen", "Account Executive"), ("Luis Ortega", "Account Executive"))
ENGINEERS = (("Priya Natarajan", "Solutions Engineer"), ("Tom Becker", "Solutions Engineer"))
BUYERS = (
    ("Dana Whitfield", "VP of Sales"), ("Sam Okafor", "Head of RevOps"),
    ("Elena Petrova", "Director of Sales Operations"), ("Marcus Reid", "CRO"),
    ("Hannah Kim", "Sales Enablement Lead"), ("Jorge Alvarez", "VP of Revenue"),
)  # fmt: skip
COMPETITORS = ("Clari", "Outreach", "Salesloft", "HubSpot", "Chorus", "Avoma")
STAGES = (
    "Prospecting", "Qualification", "Needs Analysis", "Value Proposition",
    "Id. Decision Makers", "Proposal/Price Quote", "Negotiation/Review", "Closed Won",
)  # fmt: skip
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")  # fmt: skip
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")


@dataclass(frozen=True)
class Speaker:
    id: str
    name: str
    title: str
    company: str
    email: str
    internal: bool


@dataclass(frozen=True)
class Utterance:
    speaker_id: str
    start_ms: int
    end_ms: int
    text: str


@dataclass(frozen=True)
class DemoCall:
    id: str  # Gong call ids are 19-digit numbers kept as strings
    title: str
    account: str
    started: datetime
    duration_s: int
    speakers: tuple[Speaker, ...]
    utterances: tuple[Utterance, ...]

    def transcript_text(self) -> str:
        names = {speaker.id: speaker.name for speaker in self.speakers}
        return "\n".join(f"{names[u.speaker_id]}: {u.text}" for u in self.utterances)


@dataclass(frozen=True)
class DemoOpportunity:
    id: str  # 18-character Salesforce id
    name: str
    account: str
    stage_name: str
    amount: float
    close_date: date
    industry: str
    description: str
    notes: str
    last_modified: datetime


def _email(name: str, company: str) -> str:
    first, last = name.lower().split(" ", 1)
    return f"{first}.{last.replace(' ', '')}@{company.lower().replace(' ', '')}.example"


def _speakers(rng: random.Random, account: str, call_index: int) -> tuple[Speaker, ...]:
    picks = [(*rng.choice(REPS), SELLER, True), (*rng.choice(ENGINEERS), SELLER, True)]
    picks += [(*buyer, account, False) for buyer in rng.sample(BUYERS, 2)]
    return tuple(
        Speaker(f"{call_index:04d}{n}", name, title, company, _email(name, company), internal)
        for n, (name, title, company, internal) in enumerate(picks)
    )


def _money(rng: random.Random, low: int, high: int) -> str:
    value = rng.randrange(low, high, 1000)
    return rng.choice((f"${value:,}", f"${value // 1000}k", f"{value:,} dollars"))


def _lines(rng: random.Random, s: tuple[Speaker, ...], started: datetime) -> list[tuple[int, str]]:
    rep, se, champion, buyer = range(4)
    seats = rng.choice((25, 40, 60, 80, 120, 150, 200))
    rivals = rng.sample(COMPETITORS, 2)
    go_live = started + timedelta(days=rng.randrange(30, 120))
    close = started + timedelta(days=rng.randrange(14, 60))
    review = started + timedelta(days=rng.randrange(3, 12))
    first = s[champion].name.split()[0]
    return [
        (
            rep,
            f"Thanks for making time today, {first}. "
            "I'd love to recap the pain points in forecasting you shared last time.",
        ),
        (
            champion,
            f"Sure. We have about {seats - rng.randrange(0, seats // 4)} sales reps today "
            f"and plan to hire more by Q{rng.randrange(1, 5)}.",
        ),
        (
            buyer,
            rng.choice(
                (
                    "Honestly our current process is spreadsheets and hope.",
                    "The board keeps asking why our forecast misses by twenty percent.",
                )
            ),
        ),
        (se, "Let me show you how the deal inspection view handles that, it pulls activity straight from your CRM."),
        (
            champion,
            f"We're also evaluating {rivals[0]}, their quote came in around {_money(rng, 30000, 90000)} a year.",
        ),
        (rep, f"Understood. For {seats} seats our annual price would be {_money(rng, 40000, 150000)}."),
        (
            buyer,
            f"Our budget for this is {_money(rng, 50000, 180000)} for the fiscal year, "
            "and our CFO needs to sign off on anything above that.",
        ),
        (champion, f"We want to go live by {MONTHS[go_live.month - 1]} {go_live.day}."),
        (
            buyer,
            f"Procurement will need to review the MSA before we can sign by "
            f"{MONTHS[close.month - 1]} {close.day}, {close.year}.",
        ),
        (champion, f"One more thing, a few of our managers used {rivals[1]} at their last company."),
        (rep, f"I'll send the revised proposal by {rng.choice(WEEKDAYS)}."),
        (se, "We will set up a sandbox with your pipeline data so the team can try it."),
        (rep, f"Next step is a technical review with your IT team on {MONTHS[review.month - 1]} {review.day}."),
        (champion, "Sounds good, talk then."),
    ]


def _call(rng: random.Random, index: int, started: datetime) -> DemoCall:
    account, _industry = ACCOUNTS[index % len(ACCOUNTS)]
    speakers = _speakers(rng, account, index)
    clock, utterances = 0, []
    for who, text in _lines(rng, speakers, started):
        length = 1500 + 55 * len(text) + rng.randrange(0, 1500)
        utterances.append(Utterance(speakers[who].id, clock, clock + length, text))
        clock += length + rng.randrange(200, 1200)
    return DemoCall(
        id=str(7_000_000_000_000_000_000 + rng.randrange(10**17, 10**18)),
        title=f"{account} <> {SELLER}: {rng.choice(('Discovery', 'Demo', 'Pricing review'))}",
        account=account,
        started=started,
        duration_s=clock // 1000 + 30,
        speakers=speakers,
        utterances=tuple(utterances),
    )


def demo_calls(
    seed: int = 7, count: int = 20, *, start: datetime = datetime(2025, 3, 3, 15, tzinfo=UTC)
) -> list[DemoCall]:
    """`count` calls a few hours apart from `start`, in chronological order."""
    rng = random.Random(seed)
    started, calls = start, []
    for index in range(count):
        calls.append(_call(rng, index, started))
        started += timedelta(hours=rng.randrange(3, 30), minutes=rng.choice((0, 15, 30, 45)))
    return calls


def _sfid(rng: random.Random, prefix: str) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return prefix + "".join(rng.choice(alphabet) for _ in range(15 - len(prefix))) + "AAA"


def demo_opportunities(seed: int = 7, count: int = 20, *, today: date = date(2025, 3, 3)) -> list[DemoOpportunity]:
    rng = random.Random(seed * 7919 + 1)
    opportunities = []
    for index in range(count):
        account, industry = ACCOUNTS[index % len(ACCOUNTS)]
        close = today + timedelta(days=rng.randrange(10, 150))
        rival = rng.choice(COMPETITORS)
        seats = rng.choice((25, 50, 100, 150, 250))
        opportunities.append(
            DemoOpportunity(
                id=_sfid(rng, "006"),
                name=f"{account} - {seats} seats",
                account=account,
                stage_name=rng.choice(STAGES),
                amount=float(rng.randrange(20_000, 250_000, 500)),
                close_date=close,
                industry=industry,
                description=(
                    f"{account} wants forecasting for {seats} users. Also evaluating {rival}. "
                    f"The CFO needs to approve any budget above {_money(rng, 40000, 120000)}."
                ),
                notes=(
                    f"We'll send the security questionnaire by {rng.choice(WEEKDAYS)}. "
                    f"Next step is a pilot kickoff on {MONTHS[close.month - 1]} {close.day}."
                ),
                last_modified=datetime(today.year, today.month, today.day, 9, tzinfo=UTC)
                + timedelta(minutes=37 * index),
            )
        )
    return opportunities
