"""Types are checked as types: no code of ingest/ or dashboard/ decides by a class's name
(`type(exc).__name__ == "AwaitApproval"`, `"RateLimit" in type(exc).__name__`). A name check
breaks silently when a class is renamed or subclassed; `isinstance` or an attribute the classes
carry (`rate_limited`) does not. Naming a class in a message or a log is fine: only comparisons
and `startswith`/`endswith` on a `__name__` or `__qualname__` count.

The ledger stores a failure by its class's name (`error_name`), so code reading stored failures
must compare names; it compares them with names that follow the classes (`AttemptWait`,
`error_class_name(NonRetryableError)`), never with a name typed out as a string."""

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
        if (
            isinstance(node, ast.Compare)
            and any(map(_is_class_name, [node.left, *node.comparators]))
            or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("startswith", "endswith")
                and _is_class_name(node.func.value)
            )
        ):
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
        "if isinstance(exc, AwaitApproval) or exc.rate_limited: pass\n"
    )
    assert class_name_checks(source) == [1, 2, 3]


ERROR_NAME_FILTERS = {"error_name", "error_name__in", "error_name__startswith", "error_name__endswith"}


def _mentions_error_name(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Attribute)
        and n.attr == "error_name"
        or isinstance(n, ast.Name)
        and n.id == "error_name"
        or isinstance(n, ast.Constant)
        and n.value == "error_name"
        for n in ast.walk(node)
    )


def _typed_out_names(node: ast.AST) -> bool:
    """A non-empty string literal, or a set, tuple or list holding one (the empty name clears a column)."""
    items = node.elts if isinstance(node, ast.Set | ast.Tuple | ast.List) else [node]
    return any(isinstance(i, ast.Constant) and isinstance(i.value, str) and i.value for i in items)


def stored_name_checks(source: str, filename: str = "<source>") -> list[int]:
    """The lines of `source` that compare a stored failure's name with a name typed out as a string."""
    lines = set()
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(map(_mentions_error_name, sides)) and any(map(_typed_out_names, sides)):
                lines.add(node.lineno)
        elif isinstance(node, ast.Call) and any(
            k.arg in ERROR_NAME_FILTERS and _typed_out_names(k.value) for k in node.keywords
        ):
            lines.add(node.lineno)
    return sorted(lines)


@pytest.mark.pure
def test_no_code_compares_a_stored_failure_s_name_with_a_typed_out_name():
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for package in ("ingest", "dashboard")
        for path in sorted((ROOT / package).rglob("*.py"))
        for line in stored_name_checks(path.read_text(), str(path))
    ]
    assert found == []


@pytest.mark.pure
def test_the_stored_name_check_finds_each_way_of_typing_a_name_out():
    source = (
        'if a.error_name == "AwaitingApproval": pass\n'
        'Attempt.objects.filter(error_name__in=("AwaitingApproval", "BudgetHeld"))\n'
        'if error_name.rsplit(".", 1)[-1] in {"NonRetryableError", "BudgetExceeded"}: pass\n'
        'Attempt.objects.filter(error_name="BudgetHeld")\n'
        'Step.objects.update(error_name="", error_message="")\n'
        "if a.error_name == AttemptWait.AWAITING_APPROVAL: pass\n"
        "Attempt.objects.filter(error_name__in=AttemptWait.values)\n"
        "if error_name in _PERMANENT: pass\n"
    )
    assert stored_name_checks(source) == [1, 2, 3, 4]
