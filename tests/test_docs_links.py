"""The README opens with its two commands and leads to the guides; every link in the docs lands.

CI runs the README's second line verbatim (.ci/run), and a newcomer reads only the top of the
README before following its links to docs/operators.md and docs/developers.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_opens_with_its_two_commands_then_links_the_guides() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines[0].strip().endswith(".venv/bin/python manage.py up")
    assert lines[1].strip().endswith(".venv/bin/python -m pytest")
    assert all(line.startswith("    python3.11 -m venv .venv && ") for line in lines[:2])
    links = LINK.findall("\n".join(lines))
    assert "docs/operators.md" in links and "docs/developers.md" in links


def test_every_relative_link_in_the_readme_and_docs_lands_on_a_file() -> None:
    broken = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in PAGES
        for target in LINK.findall(page.read_text())
        if not re.match(r"[a-z]+:", target)
        and not target.startswith("#")
        and not (page.parent / target.split("#")[0]).exists()
    ]
    assert broken == []
