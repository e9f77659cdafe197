"""Stage 1 of URL classification: the rules engine. Pure and fast.

Every rule that matches a URL contributes; for each axis the highest-priority rule that sets it
wins (then the rule naming more of the host, then the file's order) and modifiers are the union. Rules naming hosts are
indexed by domain, so a URL tries only the rules of its own domain and its parents plus the generic
ones.

Confidence is the mean of the domain-type and page-type winners' confidences, a missing one
counting 0: a URL whose domain or page type no rule knows stays under the pipeline's early exit
(70) and goes on to the similarity and content stages.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from ingest.classify.rules import Rule, load_rules
from ingest.classify.taxonomy import PIPELINE_MIN_CONFIDENCE

__all__ = ["RulesMatcher", "RulesResult", "rules_classify", "split_url"]


@dataclass(frozen=True)
class RulesResult:
    """The rules stage's answer, in ClassificationResult's fields. `rule` is the rule that
    decided the page type (else the domain type); `rules` every rule that matched, strongest
    first."""

    url: str
    confidence: int
    domain_type: str | None
    page_type: str | None
    tactic_type: str | None
    channel_bucket: str | None
    media_type: str | None
    modifiers: tuple[str, ...]
    rule: str | None
    rules: tuple[str, ...]
    needs_vectorize: bool

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["modifiers"] = list(self.modifiers)
        data["rules"] = list(self.rules)
        return data


def split_url(url: str) -> tuple[str, str, str]:
    """(host without `www.` and port, lowercased path or "/", lowercased query)."""
    text = url.strip()
    if "://" not in text[:12]:
        text = "http://" + text  # a bare "example.com/x" as backlink lists sometimes give
    parts = urlsplit(text)
    host = (parts.hostname or "").rstrip(".")
    if host.startswith("www."):
        host = host[4:]
    return host, (parts.path or "/").lower(), parts.query.lower()


def _suffixes(host: str) -> Iterable[str]:
    """ "a.b.c.com" → "a.b.c.com", "b.c.com", "c.com", "com"."""
    start = 0
    while True:
        yield host[start:]
        dot = host.find(".", start)
        if dot < 0:
            return
        start = dot + 1


_Search = Callable[[str], object]


def _fast(rule: Rule) -> tuple[Rule, _Search | None, _Search | None, _Search | None]:
    return (rule, rule.host.search if rule.host else None, rule.path.search if rule.path else None,
            rule.query.search if rule.query else None)  # fmt: skip


class RulesMatcher:
    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = tuple(rules)
        by_host: dict[str, list[Rule]] = defaultdict(list)
        generic: list[Rule] = []
        for rule in self.rules:
            if rule.hosts:
                for host in rule.hosts:
                    by_host[host].append(rule)
            else:
                generic.append(rule)
        self._by_host = dict(by_host)
        # The generic rules (no `hosts`) run on every URL: keep their bound `search` methods at
        # hand and split off those needing a query, which most URLs lack.
        self._generic = tuple(_fast(rule) for rule in generic if rule.query is None)
        self._generic_query = tuple(_fast(rule) for rule in generic if rule.query is not None)

    def matching(self, url: str) -> list[Rule]:
        """Every rule matching `url`, strongest first: by priority, then by how much of the host
        the rule named (gist.github.com's rules before github.com's), then by file order."""
        host, path, query = split_url(url)
        ranked = [
            (-rule.priority, -len(suffix), rule.order, rule)
            for suffix in _suffixes(host)
            for rule in self._by_host.get(suffix, ())
            if rule.matches_rest(host, path, query)
        ]
        ranked.extend(
            (-rule.priority, 0, rule.order, rule)
            for rule, host_search, path_search, _ in self._generic
            if (path_search is None or path_search(path)) and (host_search is None or host_search(host))
        )
        if query:
            ranked.extend(
                (-rule.priority, 0, rule.order, rule)
                for rule in (fast[0] for fast in self._generic_query)
                if rule.matches_rest(host, path, query)
            )
        ranked.sort(key=lambda entry: entry[:3])
        return [entry[3] for entry in ranked]

    def classify(self, url: str) -> RulesResult:
        matched = self.matching(url)
        values: dict[str, str] = {}
        deciders: dict[str, Rule] = {}
        modifiers: list[str] = []
        for rule in matched:
            for axis, value in rule.sets.items():
                if axis not in values:
                    values[axis], deciders[axis] = value, rule
            modifiers.extend(m for m in rule.modifiers if m not in modifiers)
        domain, page = deciders.get("domain_type"), deciders.get("page_type")
        confidence = round(((domain.confidence if domain else 0) + (page.confidence if page else 0)) / 2)
        decider = page or domain
        return RulesResult(
            url=url, confidence=confidence, domain_type=values.get("domain_type"),
            page_type=values.get("page_type"), tactic_type=values.get("tactic_type"),
            channel_bucket=values.get("channel_bucket"), media_type=values.get("media_type"),
            modifiers=tuple(sorted(modifiers)), rule=decider.id if decider else None,
            rules=tuple(rule.id for rule in matched),
            needs_vectorize=confidence < PIPELINE_MIN_CONFIDENCE,
        )  # fmt: skip


_default: RulesMatcher | None = None


def rules_classify(url: str) -> RulesResult:
    """Classify `url` with the rules shipped in `rules.json` (compiled once per process)."""
    global _default
    if _default is None:
        _default = RulesMatcher(load_rules())
    return _default.classify(url)
