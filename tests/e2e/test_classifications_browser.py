"""The Classifications page in a real browser: a URL classified by the worker process shows up,
filtered by domain and stage, with its deciding stage and cost."""

from __future__ import annotations

import time

from tests.e2e.conftest import Session, create, status
from tests.e2e.servers import Stack


def test_a_classified_url_is_listed_by_domain_and_stage(viewer: Session, stack: Stack) -> None:
    instance = create(stack, "url-classify", id="e2e-urlcls-1", tenant="acme",
                      params={"url": "https://www.youtube.com/watch?v=dQw4w9WgXcQ", "skip_content": True,
                              "skip_llm": True})  # fmt: skip
    deadline = time.monotonic() + 60
    while status(stack, instance) != "complete":
        assert time.monotonic() < deadline, f"url-classify instance {instance} did not complete"
        time.sleep(0.5)
    viewer.goto("/classifications/?domain=youtube.com")
    row = viewer.page.locator("tr.classification-row")
    assert row.count() == 1
    text = row.first.inner_text()
    assert "youtube.com/watch" in text and "video" in text and "rules" in text and "cache → rules" in text
    viewer.shot("classifications")
    viewer.page.select_option("#c-source", "llm")  # htmx swaps the results in place
    viewer.page.wait_for_selector("td.empty")
    assert "source=llm" in viewer.page.url
