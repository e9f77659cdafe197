"""The search-attribute query: one grammar for the console's `attr` filter, the REST list's `attr`
parameter and `runledger list --attr`, parsed here and nowhere else. Pure (no Django), so the
command line checks an expression before it sends it and the server reads it the same way.

A query is one or more terms separated by spaces (or given as repeated `attr` parameters); an
instance matches when it matches every term:

    key:value            the attribute equals value             customer:acme
    key:v1|v2|v3         equals any of them (at most 10)        customer:acme|globex
    key>=N  key>N        a number compared (the attribute's     amount>=100
    key<=N  key<N        text read as a number)                 amount<0.5
    key:N..M             a number from N to M, both included;   amount:10..50
                         one end may be left out                amount:10..
    !term                any term negated: the attribute is     !region:eu
                         absent or the term does not hold       !amount>=100

Keys are lower-case letters, digits and `_` (a letter first, at most 40). A value is 1 to 200
characters without spaces or `|`. A number is written with digits, an optional leading `-` and an
optional decimal part (`-3`, `12.50`); an attribute whose value is not such a number matches no
comparison or range (and so matches its negation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KEY = re.compile(r"[a-z][a-z0-9_]{0,39}")
NUMBER = re.compile(r"-?[0-9]{1,15}(?:\.[0-9]{1,15})?")
# The same numbers as SQL's regular expression (PostgreSQL `~`, SQLite Django's REGEXP).
NUMBER_SQL = r"^-?[0-9]{1,15}(\.[0-9]{1,15})?$"
MAX_VALUE = 200
MAX_ALTERNATIVES = 10
MAX_TERMS = 5
COMPARISONS = (">=", "<=", ">", "<")  # two-character operators first: ">=" is not ">" then "=100"
EXAMPLES = "customer:acme, customer:acme|globex, amount>=100, amount:10..50, !region:eu"


class AttrQueryError(ValueError):
    """An attribute expression that does not parse; the message names it."""


@dataclass(frozen=True)
class AttrTerm:
    """One term. `values` for equality (any of them), else `low`/`high` (None: open) for a
    number, with `low_open`/`high_open` true where the bound itself is excluded (> and <)."""

    key: str
    values: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    negate: bool = False
    text: str = ""  # as written (normalised): what the URL and the form carry back

    @property
    def numeric(self) -> bool:
        return not self.values

    @property
    def equality(self) -> tuple[str, str] | None:
        """(key, value) for a plain `key:value` term, else None."""
        return (self.key, self.values[0]) if len(self.values) == 1 and not self.negate else None


def _number(raw: str, piece: str) -> float:
    if not NUMBER.fullmatch(raw):
        raise AttrQueryError(
            f"attribute filter {piece[:60]!r}: {raw[:30]!r} is not a number "
            "(digits, an optional - and decimal part, e.g. 100 or 12.5)"
        )
    return float(raw)


def parse_term(piece: str) -> AttrTerm:
    """One term (no spaces), or AttrQueryError naming it and what is wrong."""
    negate = piece.startswith("!")
    body = piece[1:] if negate else piece
    key_match = KEY.match(body)
    if key_match is None:
        raise AttrQueryError(
            f"attribute filter {piece[:60]!r} does not start with a key (lower-case letters, "
            f"digits and _, a letter first); e.g. {EXAMPLES}"
        )
    key, rest = key_match.group(), body[key_match.end() :]
    for op in COMPARISONS:
        if rest.startswith(op):
            n = _number(rest[len(op) :], piece)
            low, high = (n, None) if op[0] == ">" else (None, n)
            return AttrTerm(
                key=key,
                low=low,
                high=high,
                low_open=op == ">",
                high_open=op == "<",
                negate=negate,
                text=f"{'!' if negate else ''}{key}{op}{rest[len(op) :]}",
            )
    if not rest.startswith(":") or len(rest) == 1:
        raise AttrQueryError(
            f"attribute filter {piece[:60]!r} is not key:value, key>=N or key:N..M "
            f"after its key {key!r}; e.g. {EXAMPLES}"
        )
    value = rest[1:]
    text = f"{'!' if negate else ''}{key}:{value}"
    lo, dots, hi = value.partition("..")
    if dots and (lo or hi) and all(NUMBER.fullmatch(p) for p in (lo, hi) if p):
        low, high = (float(lo) if lo else None), (float(hi) if hi else None)
        if low is not None and high is not None and low > high:
            raise AttrQueryError(
                f"attribute filter {piece[:60]!r}: the range {value[:40]!r} is empty "
                "(its low end is above its high end)"
            )
        return AttrTerm(key=key, low=low, high=high, negate=negate, text=text)
    values = value.split("|")
    if len(values) > MAX_ALTERNATIVES:
        raise AttrQueryError(
            f"attribute filter {piece[:60]!r} has {len(values)} alternatives; at most {MAX_ALTERNATIVES}"
        )
    for v in values:
        if not v:
            raise AttrQueryError(f"attribute filter {piece[:60]!r} has an empty value (around a '|')")
        if len(v) > MAX_VALUE or "\x00" in v:
            raise AttrQueryError(f"attribute filter {piece[:60]!r}: a value is 1 to {MAX_VALUE} characters without NUL")
    return AttrTerm(key=key, values=tuple(dict.fromkeys(values)), negate=negate, text=text)


def parse_attr_query(raws: list[str]) -> tuple[tuple[AttrTerm, ...], list[str]]:
    """(the terms, the problems) of `raws` (each one or more terms separated by spaces). Every bad
    term is named; with any problem the caller matches nothing."""
    terms: list[AttrTerm] = []
    problems: list[str] = []
    for raw in raws:
        for piece in raw.split():
            try:
                terms.append(parse_term(piece))
            except AttrQueryError as exc:
                problems.append(str(exc))
    if len(terms) > MAX_TERMS:
        problems.append(f"{len(terms)} attribute filters; at most {MAX_TERMS}")
        return (), problems
    return tuple(terms), problems
