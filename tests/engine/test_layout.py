"""The engine stands alone: it imports nothing from the pipelines or the dashboard."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "ingest" / "engine"
FORBIDDEN = (
    "dashboard",
    "ingest.workflows",
    "ingest.sources",
    "ingest.extraction",
    "ingest.triggers",
    "ingest.models",
    "ingest.pipelines",
    "ingest.demo",
)


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


@pytest.mark.pure
def test_the_engine_imports_nothing_from_the_pipelines_or_the_dashboard():
    offenders = [
        f"{path.relative_to(ENGINE.parent.parent)} imports {name}"
        for path in sorted(ENGINE.rglob("*.py"))
        for name in imports_of(path)
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
    ]
    assert offenders == []
    assert len(list(ENGINE.rglob("*.py"))) > 15  # the walk really saw the engine
