"""The URL rules, read from `rules.json` and checked once: ids unique, regexes valid, every
value in the taxonomy, every rule with at least one example URL.

A rule in the file:

    {"id": "youtube-watch", "hosts": ["youtube.com"], "path": "^/watch$", "query": "(^|&)v=",
     "set": {"page_type": "video", "media_type": "video"}, "modifiers": [], "confidence": 95,
     "examples": ["https://www.youtube.com/watch?v=dQw4w9WgXcQ"]}

- `hosts`: registrable domains; a host matches its domain and every subdomain of it.
- `host`: a regular expression searched in the host (for `docs.*`, `*.gov`), without `www.`.
- `path` / `query`: regular expressions searched in the lowercased path and query string.
A rule matches when all its conditions do. `priority` orders rules when two set the same field
(default: host and path 400, host 300, host pattern and path 250, host pattern 200, path 100,
query 50 — the more specific wins), then the rule naming more of the host, then the file's
order. An example is a URL the rule must match with the rule's own values, or `{"url": …, "expect": {field: value}}`
when a more specific rule legitimately wins a field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ingest.classify.taxonomy import AXES, MODIFIERS

__all__ = ["RULES_PATH", "Example", "Rule", "RulesInvalid", "load_rules", "parse_rules"]

RULES_PATH = Path(__file__).with_name("rules.json")
_ALLOWED_KEYS = frozenset({"id", "hosts", "host", "path", "query", "set", "modifiers",
                           "confidence", "priority", "examples", "note"})  # fmt: skip


class RulesInvalid(ValueError):
    """The URL rules file is invalid."""


@dataclass(frozen=True)
class Example:
    url: str
    expect: Mapping[str, Any]


@dataclass(frozen=True)
class Rule:
    id: str
    order: int
    priority: int
    confidence: int
    sets: Mapping[str, str]
    modifiers: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    host: re.Pattern[str] | None = None
    path: re.Pattern[str] | None = None
    query: re.Pattern[str] | None = None
    examples: tuple[Example, ...] = field(default=(), compare=False)

    def matches_rest(self, host: str, path: str, query: str) -> bool:
        """Everything but `hosts` (the matcher's index checks those)."""
        return (
            (self.host is None or self.host.search(host) is not None)
            and (self.path is None or self.path.search(path) is not None)
            and (self.query is None or self.query.search(query) is not None)
        )


def _default_priority(raw: Mapping[str, Any]) -> int:
    if raw.get("hosts"):
        return 400 if raw.get("path") else 300
    if raw.get("host"):
        return 250 if raw.get("path") else 200
    return 100 if raw.get("path") else 50


def _compile(rule_id: str, key: str, pattern: Any) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    try:
        return re.compile(str(pattern))
    except re.error as error:
        raise RulesInvalid(f"rule {rule_id!r}: {key} {pattern!r} is not a valid regex: {error}") from error


def _check_values(rule_id: str, sets: Mapping[str, Any], modifiers: list[str]) -> None:
    for axis, value in sets.items():
        if axis not in AXES:
            raise RulesInvalid(f"rule {rule_id!r} sets {axis!r}; axes are {sorted(AXES)}")
        if value not in AXES[axis]:
            raise RulesInvalid(
                f"rule {rule_id!r}: {axis} {value!r} is not in the taxonomy; "
                f"add it to ingest/classify/taxonomy.py or use one of {sorted(AXES[axis])}"
            )
    unknown = sorted(set(modifiers) - MODIFIERS)
    if unknown:
        raise RulesInvalid(f"rule {rule_id!r}: modifiers {unknown} are not in the taxonomy")


def _example(rule_id: str, raw: Any) -> Example:
    if isinstance(raw, str):
        return Example(url=raw, expect={})
    if isinstance(raw, dict) and isinstance(raw.get("url"), str):
        return Example(url=raw["url"], expect=dict(raw.get("expect") or {}))
    raise RulesInvalid(f"rule {rule_id!r}: an example is a URL or {{'url': ..., 'expect': {{...}}}}")


def _rule(raw: Mapping[str, Any], order: int) -> Rule:
    rule_id = str(raw.get("id") or f"#{order}")
    extra = sorted(set(raw) - _ALLOWED_KEYS)
    if extra:
        raise RulesInvalid(f"rule {rule_id!r} has unknown keys {extra}")
    sets = dict(raw.get("set") or {})
    modifiers = list(raw.get("modifiers") or [])
    _check_values(rule_id, sets, modifiers)
    if not sets and not modifiers:
        raise RulesInvalid(f"rule {rule_id!r} sets nothing; give it 'set' or 'modifiers'")
    if not (raw.get("hosts") or raw.get("host") or raw.get("path") or raw.get("query")):
        raise RulesInvalid(f"rule {rule_id!r} has no condition (hosts, host, path or query)")
    examples = tuple(_example(rule_id, e) for e in raw.get("examples") or [])
    if not examples:
        raise RulesInvalid(f"rule {rule_id!r} has no example URL; every rule needs one it must match")
    return Rule(
        id=rule_id, order=order, priority=int(raw.get("priority") or _default_priority(raw)),
        confidence=int(raw.get("confidence", 70)), sets=sets, modifiers=tuple(modifiers),
        hosts=tuple(h.lower() for h in raw.get("hosts") or ()),
        host=_compile(rule_id, "host", raw.get("host")), path=_compile(rule_id, "path", raw.get("path")),
        query=_compile(rule_id, "query", raw.get("query")), examples=examples,
    )  # fmt: skip


def parse_rules(data: Any) -> tuple[Rule, ...]:
    """Rules from the file's JSON (`{"rules": [...]}`), checked; raises RulesInvalid."""
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        raise RulesInvalid('the rules file is a JSON object with a "rules" list')
    rules = tuple(_rule(raw, order) for order, raw in enumerate(data["rules"]))
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise RulesInvalid(f"rule id {rule.id!r} is used twice")
        seen.add(rule.id)
    return rules


@cache
def load_rules(path: Path = RULES_PATH) -> tuple[Rule, ...]:
    with path.open(encoding="utf-8") as handle:
        return parse_rules(json.load(handle))
