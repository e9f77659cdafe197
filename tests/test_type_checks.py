"""Types are checked as types: no code of ingest/ or dashboard/ decides by a class's name
(`type(exc).__name__ == "AwaitApproval"`, `"RateLimit" in type(exc).__name__`). A name check
breaks silently when a class is renamed or subclassed; `isinstance` or an attribute the classes
carry (`rate_limited`) does not. Naming a class in a message or a log is fine: only comparisons
and `startswith`/`endswith` on a `__name__` or `__qualname__` count."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NAMES = {"__name__", "__qualname__"}


def _is_class_name(node: ast.AST) -> bool:
    # `__name__ == "__main__"` is the module's name, a bare Name: not an attribute of a class.
    return isinstance(node, ast.Attribute) and node.attr in NAMES


def class_name_checks(source: str, filename: str = "<source>") -> list[int]:
    """The lines of `source` that decide by a class's name."""
    lines = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Compare) and any(map(_is_class_name, [node.left, *node.comparators])) or (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith") and _is_class_name(node.func.value)):
            lines.append(node.lineno)
    return sorted(lines)


@pytest.mark.pure
def test_no_code_decides_by_a_class_name():
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for package in ("ingest", "dashboard")
        for path in sorted((ROOT / package).rglob("*.py"))
        for line in class_name_checks(path.read_text(), str(path))
    ]
    assert found == []


@pytest.mark.pure
def test_the_check_finds_each_way_of_comparing_a_class_name():
    source = (
        'if exc.__class__.__name__ == "AwaitApproval": pass\n'
        'if "RateLimit" not in type(exc).__name__: pass\n'
        'if type(exc).__qualname__.endswith("Limited"): pass\n'
        'if __name__ == "__main__": pass\n'
        'message = f"{type(exc).__name__}: {exc}"\n'
        'if isinstance(exc, AwaitApproval) or exc.rate_limited: pass\n'
    )
    assert class_name_checks(source) == [1, 2, 3]
