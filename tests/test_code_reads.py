"""The code and the docs explain themselves in their own terms.

A comment, docstring, template (ingest/, dashboard/, templates/) or doc page that says
"seed 004's checkBudget", "ADR-026" or "issue 20" points a reader at something this repository
does not hold: it must say what the code does and why instead. Migrations are history and keep what they were written
with."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"\b(?:seed ?0\d+|ADR-? ?\d+|issues? ?#?\d+|the seed's)", re.I)
SUFFIXES = {".py", ".html", ".md", ".txt", ".js", ".css"}


def sources() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for package in ("ingest", "dashboard", "templates"):
        files += [
            path
            for path in sorted((ROOT / package).rglob("*"))
            if path.suffix in SUFFIXES and "migrations" not in path.parts and path.is_file()
        ]
    return files


def citations(text: str) -> list[str]:
    return [match.group(0) for match in CITATION.finditer(text)]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("LOW_CONFIDENCE = 65  # seed 004: below the threshold", ["seed 004"]),
        ("Seed 002's polling pattern", ["Seed 002"]),
        ('"""Deterministic id (ADR-026): the same fact..."""', ["ADR-026"]),
        ("of a shared 2-core machine (issue 20)", ["issue 20"]),
        ("see Issue #18, sections 4 and 5", ["Issue #18"]),
        ("The seed's DomainOnboardParams", ["The seed's"]),
        ("demo_seed(seed=7) ingests the demo data set", []),
        ("a tissue 20 cm wide; issued 3 tokens", []),
    ],
)
def test_the_pattern_finds_citations_and_nothing_else(text: str, found: list[str]) -> None:
    assert citations(text) == found


def test_the_scan_covers_the_code_templates_and_docs() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in sources()}
    assert {"README.md", "docs/engine-contract.md", "ingest/engine/results.py"} <= names
    assert any(name.startswith("templates/") and name.endswith(".html") for name in names)
    assert not any("/migrations/" in name for name in names)


def test_no_comment_docstring_or_doc_cites_a_seed_an_adr_or_an_issue() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {citation}"
        for path in sources()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        for citation in citations(line)
    ]
    assert found == [], "say what the code does and why instead:\n" + "\n".join(found)
