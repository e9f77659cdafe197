"""The registry of workflows by name: one class per name; the same class again is harmless."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator

import pytest

from ingest.engine import DuplicateWorkflow, Workflow, get_workflow
from ingest.engine import workflow as registry

pytestmark = pytest.mark.pure


@pytest.fixture
def forget() -> Iterator[list[str]]:
    """Names registered by the test, removed from the process's registry afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        registry._registry.pop(name, None)


def test_a_second_class_under_a_taken_name_is_refused_naming_both(forget):
    forget.append("t-registry-taken")

    class First(Workflow):
        name = "t-registry-taken"

    with pytest.raises(DuplicateWorkflow) as info:

        class Second(Workflow):
            name = "t-registry-taken"

    message = str(info.value)
    assert "'t-registry-taken' is already registered by" in message
    assert f"{__name__}.{First.__qualname__}" in message and ".Second" in message
    assert get_workflow("t-registry-taken") is First  # the first keeps the name


def test_the_same_class_defined_again_replaces_itself_without_complaint(forget):
    forget.append("t-registry-again")

    def define() -> type[Workflow]:
        class Again(Workflow):
            name = "t-registry-again"

        return Again

    first, second = define(), define()
    assert first is not second and get_workflow("t-registry-again") is second


def test_reloading_a_module_of_workflows_is_harmless(tmp_path, monkeypatch, forget):
    forget.append("t-registry-reloaded")
    (tmp_path / "reloaded_workflows.py").write_text(
        'from ingest.engine import Workflow\n\n\nclass Reloaded(Workflow):\n    name = "t-registry-reloaded"\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("reloaded_workflows")
    try:
        before = module.Reloaded
        importlib.reload(module)
        assert module.Reloaded is not before and get_workflow("t-registry-reloaded") is module.Reloaded
    finally:
        sys.modules.pop("reloaded_workflows", None)
