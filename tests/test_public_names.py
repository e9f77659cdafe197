"""Every name the docs show as public imports where they say: a dotted name in README.md or
docs/*.md, a `from … import …` line of their examples, the engine's facade (`__all__`) and the
operator services docs/engine-contract.md lists. A name that moved keeps its old place, with a
DeprecationWarning, for one release ("Moved names" in docs/engine-contract.md)."""

from __future__ import annotations

import importlib
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CONTRACT = ROOT / "docs" / "engine-contract.md"
# A dotted name inside backticks; not the tail of a path (`bench/dashboard.py`).
DOTTED = re.compile(r"(?<![\w/.-])((?:ingest|dashboard)(?:\.[A-Za-z_]\w*)+)")
FROM_IMPORT = re.compile(r"^\s*from ((?:ingest|dashboard)[\w.]*) import ([\w, ]+)$", re.M)
MOVED_LINE = re.compile(r"^- `([\w.]+)` → `([\w.]+)`$", re.M)


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    following = re.search(r"^#{2,3} ", text[start + len(heading) :], re.M)
    return text[start : start + len(heading) + following.start()] if following else text[start:]


def moved() -> dict[str, str]:
    return dict(MOVED_LINE.findall(_section(CONTRACT.read_text(), "### Moved names")))


def documented() -> dict[str, str]:
    """name -> the file that shows it (the first one)."""
    names: dict[str, str] = {}
    for path in DOCS:
        text = path.read_text()
        for span in re.findall(r"`([^`\n]+)`", text):
            for found in DOTTED.finditer(span):
                if not found.group(1).endswith(".py"):
                    names.setdefault(found.group(1), path.name)
        for module, imported in FROM_IMPORT.findall(text):
            for name in imported.split(","):
                names.setdefault(f"{module}.{name.strip()}", path.name)
    return names


def resolve(dotted: str) -> Any:
    """The object a dotted name means: its longest importable module, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            found: Any = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module.startswith(exc.name):
                continue
            raise
        for attribute in parts[i:]:
            found = getattr(found, attribute)
        return found
    raise ImportError(dotted)


def test_the_docs_show_public_names_and_the_moved_ones() -> None:
    names = documented()
    assert "ingest.engine.worker.turns.run_until_idle" in names and "ingest.engine.Workflow" in names
    assert moved() == {
        "ingest.engine.worker.run_until_idle": "ingest.engine.worker.turns.run_until_idle",
        "ingest.engine.worker.Worker": "ingest.engine.worker.loop.Worker",
    }


@pytest.mark.parametrize("name", sorted(set(documented()) - set(moved())))
def test_every_name_the_docs_show_imports_where_they_say(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # a documented name is not a moved one
        resolve(name)


@pytest.mark.parametrize(("old", "new"), sorted(moved().items()))
def test_a_moved_name_still_imports_from_its_old_place_with_a_warning(old: str, new: str) -> None:
    module, name = old.rsplit(".", 1)
    with pytest.warns(DeprecationWarning, match=re.escape(new)):
        exec(f"from {module} import {name} as found", namespace := {})  # noqa: S102 - the import statement itself
    assert namespace["found"] is resolve(new)


def test_every_name_of_the_engine_facade_imports() -> None:
    import ingest.engine as engine

    missing = [name for name in engine.__all__ if not hasattr(engine, name)]
    assert missing == []


def test_the_operator_services_the_contract_lists_are_in_the_modules_it_names() -> None:
    section = _section(CONTRACT.read_text(), "## Operator services")
    modules = [importlib.import_module(f"ingest.engine.{m}") for m in re.findall(r"`(services\.\w+)`", section)]
    functions = set(re.findall(r"`(\w+)\(", section))
    assert len(modules) >= 7 and len(functions) >= 10
    missing = sorted(f for f in functions if not any(hasattr(m, f) for m in modules))
    assert missing == []


def test_the_instance_api_and_its_errors_import_from_the_engine() -> None:
    import ingest.engine as engine

    section = _section(CONTRACT.read_text(), "## Instances (ingest.engine)")
    names = set(re.findall(r"`(\w+)\(", section)) | set(re.findall(r"`([A-Z]\w+)`", section))
    assert {"create", "create_batch", "get", "InstanceNotFound", "EngineError"} <= names
    assert sorted(n for n in names if not hasattr(engine, n)) == []
