"""A web process compiles its templates and builds its URL lookups at startup, then freezes the
objects alive then out of the collector's way (dashboard/warm.py: full collections were the
instances list's p99)."""

from __future__ import annotations

import gc
import logging
from pathlib import Path

import pytest
from django.conf import settings
from django.template import engines
from django.test import override_settings

from dashboard.warm import templates_load, warm_and_freeze


@pytest.fixture
def unfreeze():
    yield
    gc.unfreeze()


def _cached_names() -> set[str]:
    """The templates Django's cached loader holds (template_partials wraps it)."""
    outer = engines["django"].engine.template_loaders[0]
    cached = next(inner for inner in [outer, *getattr(outer, "loaders", [])] if hasattr(inner, "get_template_cache"))
    return set(cached.get_template_cache)  # keyed by the name alone when no loader is skipped


def test_every_project_template_is_compiled_and_what_is_alive_is_frozen(unfreeze):
    names = {
        p.relative_to(settings.BASE_DIR / "templates").as_posix()
        for p in (settings.BASE_DIR / "templates").rglob("*.html")
    }
    assert len(names) > 20
    done = warm_and_freeze()
    assert done["templates"] == len(names)
    assert names <= _cached_names()  # the cached loader keeps each: no compile on a first request
    assert done["frozen"] > 50_000
    gc.collect()
    # A full collection leaves them where they are; only an object freed by its reference count
    # leaves the permanent generation (the threads of earlier tests, live servers and workers,
    # still run in this process and free some at any moment).
    assert 0.95 * done["frozen"] < gc.get_freeze_count() <= done["frozen"]


def test_a_template_that_does_not_compile_is_logged_and_the_others_still_load(tmp_path: Path, caplog):
    (tmp_path / "good.html").write_text("{{ name }}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "bad.html").write_text("{% if %}")
    templates = [{**settings.TEMPLATES[0], "DIRS": [tmp_path], "APP_DIRS": False}]
    with override_settings(TEMPLATES=templates), caplog.at_level(logging.WARNING, logger="runledger.web"):
        assert templates_load() == 1
        assert "good.html" in _cached_names()
    assert any("sub/bad.html does not compile" in r.getMessage() for r in caplog.records)
