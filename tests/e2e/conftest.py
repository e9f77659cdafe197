"""Browser tests: daphne and a worker process on a SQLite file, Chromium driven by Playwright.

Skipped without /usr/bin/chromium on a laptop; under CI=true a missing Chromium fails.
Screenshots of every page (1440×900) land in test-artifacts/screenshots/.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CHROMIUM, chromium_available, require
from tests.e2e.servers import ROOT, Stack

SHOTS = ROOT / "test-artifacts" / "screenshots"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@contextmanager
def started_stack(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Stack]:
    """A stack on a SQLite ledger of its own, with 8 worker slots (earlier tests' bulk batches and
    rate-capped redrives may still hold some), whose logs a failed test prints."""
    require(f"Chromium at {CHROMIUM}", chromium_available())
    base = tmp_path_factory.mktemp(name)
    s = Stack(f"sqlite:///{base / 'runledger.sqlite3'}", logs=base / "logs", worker_concurrency=8).start()
    _STACKS.append(s)
    try:
        yield s
    finally:
        _STACKS.remove(s)
        s.stop()


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with started_stack(tmp_path_factory, "e2e") as s:
        yield s


_STACKS: list[Stack] = []
LOG_TAIL = 120  # lines of each server process's log shown under a failed browser test


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed browser test shows what the worker and daphne logged: a timeout in the page alone
    cannot say whether the engine, the live feed or the page was late."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for stack in _STACKS:
        for log in sorted(stack.logs.glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-LOG_TAIL:]
            report.sections.append((f"{log.name} (last {len(lines)} lines)", "\n".join(lines)))


@pytest.fixture(scope="module")
def browser(stack: Stack) -> Iterator[Any]:
    # Module scope: Playwright's sync API keeps an asyncio loop running in this thread while it
    # is open, and Django refuses database calls from a thread with a running loop.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Session:
    """A logged-in browser tab of one persona, with a screenshot helper."""

    def __init__(self, page: Any, base: str) -> None:
        self.page = page
        self.base = base

    def goto(self, path: str) -> Any:
        return self.page.goto(self.base + path)

    def shot(self, name: str, *, full_page: bool = False) -> Path:
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"{name}.png"
        self.page.wait_for_timeout(150)  # let Plotly and the relative times settle
        self.page.screenshot(path=str(path), full_page=full_page)
        return path


def login(
    browser: Any, stack: Stack, username: str, *, width: int = 1440, height: int = 900, timeout: float = 15_000
) -> Session:
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(timeout)
    s = Session(page, stack.base_url)
    s.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", username)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)
    return s


@pytest.fixture
def operator(browser: Any, stack: Stack) -> Iterator[Session]:
    s = login(browser, stack, "operator")
    yield s
    s.page.context.close()


@pytest.fixture
def viewer(browser: Any, stack: Stack) -> Iterator[Session]:
    s = login(browser, stack, "viewer")
    yield s
    s.page.context.close()


@pytest.fixture
def stranger(browser: Any, stack: Stack) -> Iterator[Session]:
    s = login(browser, stack, "stranger")
    yield s
    s.page.context.close()


def create(stack: Stack, workflow: str, *, id: str, tenant: str = "acme", params: dict[str, Any] | None = None) -> str:
    raw = json.dumps(params or {})
    stack.python(
        f"import json; from ingest.engine import create; "
        f"create({workflow!r}, id={id!r}, tenant={tenant!r}, params=json.loads({raw!r}))"
    )
    return id


def status(stack: Stack, instance_id: str) -> str:
    return stack.python(
        f"from ingest.engine.models import Instance; print(Instance.objects.get(id={instance_id!r}).status)"
    ).strip()
