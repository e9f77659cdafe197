"""Errors keep their names: code that turns a caught error into a permanent step failure uses
`NonRetryableError.wrap(error)` (or `.wrap(error, message)` to say more), never
`NonRetryableError(str(error))` or `NonRetryableError(f"...{error}")`, which store every permanent
Gong, LLM or DataForSEO failure as "NonRetryableError" so dead letters cannot group them by what
really failed. A NonRetryableError of the code's own making (a bad param, a missing connection)
names no caught error and is fine."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _is_exception_annotation(node: ast.expr | None) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name.endswith(("Error", "Exception"))


def _error_names(scope: ast.AST) -> set[str]:
    """The names `scope` binds to an error: an `except ... as name`, or a function's parameters
    annotated with an error class."""
    if isinstance(scope, ast.ExceptHandler):
        return {scope.name} if scope.name else set()
    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
        args = scope.args
        return {
            a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs] if _is_exception_annotation(a.annotation)
        }
    return set()


def _is_non_retryable(node: ast.AST) -> bool:
    func = node.func if isinstance(node, ast.Call) else None
    return (
        isinstance(func, ast.Name)
        and func.id == "NonRetryableError"
        or isinstance(func, ast.Attribute)
        and func.attr == "NonRetryableError"
    )


def name_losing_wraps(source: str, filename: str = "<source>") -> list[int]:
    """The lines of `source` that build a NonRetryableError from an error they caught or were given
    without `.wrap`: the error's class name would be lost."""
    lines = set()
    for scope in ast.walk(ast.parse(source, filename=filename)):
        if not (errors := _error_names(scope)):
            continue
        for node in ast.walk(scope):
            if isinstance(node, ast.Call) and _is_non_retryable(node):
                given = [*node.args, *(k.value for k in node.keywords)]
                if any(isinstance(n, ast.Name) and n.id in errors for arg in given for n in ast.walk(arg)):
                    lines.add(node.lineno)
    return sorted(lines)


@pytest.mark.pure
def test_no_code_turns_an_error_into_a_permanent_failure_without_its_name():
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for package in ("ingest", "dashboard")
        for path in sorted((ROOT / package).rglob("*.py"))
        for line in name_losing_wraps(path.read_text(), str(path))
    ]
    assert found == []


@pytest.mark.pure
def test_the_check_finds_each_way_of_dropping_an_error_s_name():
    source = (
        "def source_error_step(error: SourceError) -> Exception:\n"  # 1
        "    return NonRetryableError(str(error))\n"  # 2
        "def fetch():\n"  # 3
        "    try:\n"  # 4
        "        call()\n"  # 5
        "    except PriceNotFound as error:\n"  # 6
        "        raise NonRetryableError(f'cannot reserve: {error}') from error\n"  # 7
        "    except errors.GongError as exc:\n"  # 8
        "        raise engine.NonRetryableError(message=str(exc)) from None\n"  # 9
        "    except KeyError as error:\n"  # 10
        "        raise NonRetryableError.wrap(error, f'no row: {error}') from error\n"  # 11
        "def check(value):\n"  # 12
        "    raise NonRetryableError(f'param must be true or false, got {value!r}')\n"  # 13
    )
    assert name_losing_wraps(source) == [2, 7, 9]
