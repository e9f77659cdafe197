"""Start a run by hand in a real browser at 1280 px: the workflow page's form refuses bad params
and a bad id in place, then starts the run and lands on its page, where the worker completes it."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.e2e.conftest import login, status
from tests.e2e.servers import Stack

pytestmark = pytest.mark.e2e


def test_an_operator_starts_a_run_from_the_workflow_page_and_lands_on_it(browser: Any, stack: Stack):
    session = login(browser, stack, "operator", width=1280, height=900)
    page = session.page
    try:
        session.goto("/workflows/e2e-live-steps/")
        page.get_by_role("link", name="Start run").click()
        form = page.locator("#start-form")
        form.locator("textarea[name=params]").fill('{"steps": 2,')
        form.locator("input[name=id]").fill("-no")
        form.locator("textarea[name=search_attributes]").fill("customer=acme\nwave")
        form.get_by_role("button", name="Start run").click()
        page.wait_for_selector("#start-invalid")
        assert "3 fields to correct" in page.locator("#start-invalid").inner_text()
        errors = form.locator(".errorlist").all_inner_texts()
        assert len(errors) == 3 and any("not valid JSON" in e for e in errors)
        assert any("line 2 is not key=value" in e for e in errors)
        assert form.locator("textarea[name=params]").input_value() == '{"steps": 2,'  # kept for correcting
        session.shot("start-run-errors-1280")
        form.locator("textarea[name=params]").fill('{"steps": 2, "pause": 0.05}')
        form.locator("input[name=id]").fill("acme-by-hand")
        form.locator("select[name=tenant]").select_option("acme")
        form.locator("input[name=priority]").fill("3")
        form.locator("textarea[name=search_attributes]").fill("customer=acme\nwave=1")
        form.get_by_role("button", name="Start run").click()
        page.wait_for_url(re.compile(r"/instances/acme-by-hand/$"))
        assert "Run acme-by-hand of e2e-live-steps started" in page.locator("#messages").inner_text()
        page.wait_for_selector("#instance-header .status-complete", timeout=30_000)
        assert status(stack, "acme-by-hand") == "complete"
        session.shot("start-run-landed-1280")
        audit = stack.python(
            "from dashboard.models import AuditEntry; "
            "e = AuditEntry.objects.get(action='instance.start'); print(e.actor, e.source, e.tenants)"
        )
        assert audit.strip() == "operator web ['acme']"
        tags = stack.python(
            "from ingest.engine.models import InstanceAttributes; "
            "print(InstanceAttributes.objects.get(instance_id='acme-by-hand').attributes)"
        )
        assert tags.strip() == "{'customer': 'acme', 'wave': '1'}"
    finally:
        page.context.close()
