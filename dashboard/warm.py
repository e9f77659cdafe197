"""A web process's startup: build what its first requests would build, then keep the garbage
collector off everything alive at that point.

Why: CPython's full collection walks every tracked object. A web process holds ~140,000 of them
after Django, the apps and their imports are loaded (more once the URL resolver and the
templates are built), and a full collection of those takes tens of milliseconds; it comes
every few dozen requests and lands on whichever request is running, which made the slowest
requests of the instances list (bench/instances_list.py; figures in docs/bulk-actions.md).
`gc.freeze()` moves the objects alive now to a permanent generation that collections skip; they
live as long as the process anyway. Built first, so they are frozen too: the URL resolver and
every template of the project (the cached loader keeps them when DEBUG is off), which also
spares the first requests their compile time."""

from __future__ import annotations

import gc
import logging
from pathlib import Path

from django.template import TemplateSyntaxError, engines
from django.urls import get_resolver

log = logging.getLogger("runledger.web")


def templates_load() -> int:
    """Compile every .html template under the project's template directories; returns how many.
    A template that does not compile is logged and left for its page to report, as before."""
    loaded = 0
    for backend in engines.all():
        for folder in map(Path, backend.template_dirs):  # DIRS, then each app's templates/
            for path in sorted(folder.rglob("*.html")):
                name = path.relative_to(folder).as_posix()
                try:
                    backend.get_template(name)
                except TemplateSyntaxError as exc:
                    log.warning("template %s does not compile: %s", name, exc)
                    continue
                loaded += 1
    return loaded


def warm_and_freeze() -> dict[str, int]:
    """Build the URL resolver and every template, collect once, then freeze what is alive.
    Returns what it did, for the startup log and the tests."""
    _ = get_resolver().reverse_dict  # builds the lookups the first {% url %} would build
    templates = templates_load()
    gc.collect()
    gc.freeze()
    done = {"templates": templates, "frozen": gc.get_freeze_count()}
    log.debug("web process warmed: %(templates)d templates compiled, %(frozen)d objects frozen", done)
    return done
