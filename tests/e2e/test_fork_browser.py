"""Fork from a step in a real browser: the form on the instance page refuses a missing step in
place, then starts the fork, which completes on the worker and links back to its origin."""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import Session, create, status
from tests.e2e.servers import Stack, wait_until

pytestmark = pytest.mark.e2e


def test_an_operator_forks_an_instance_from_a_step_with_edited_params(operator: Session, stack: Stack):
    create(stack, "e2e-live-steps", id="acme-forkme", params={"steps": 4, "pause": 0.05})
    wait_until(lambda: status(stack, "acme-forkme") == "complete", timeout=30, what="acme-forkme to complete")
    page = operator.page
    operator.goto("/instances/acme-forkme/")
    page.locator("#instance-header .actions").get_by_role("link", name="Fork…").click()
    dialog = page.locator("#rl-dialog")
    dialog.locator("select[name=from_step]").wait_for()
    assert dialog.locator("select[name=from_step] option").all_inner_texts() == [
        "choose a step…",
        "fetch",
        "extract",
        "persist-facts-1",
        "persist-facts-2",
    ]
    operator.shot("fork-form")
    # Submitted without a step or a reason, and with params that are not an object: refused in place.
    dialog.locator("textarea[name=params]").fill("[1, 2]")
    dialog.get_by_role("button", name="Fork").click()
    page.wait_for_selector("form.confirm .errorlist")
    errors = page.locator("form.confirm").inner_text()
    assert "This field is required" in errors and "params must be a JSON object" in errors
    # The dialog posts into itself: the refusal keeps the instance page and the fork form open.
    assert page.url.endswith("/instances/acme-forkme/") and dialog.locator("select[name=from_step]").count() == 1
    operator.shot("fork-form-errors")
    page.select_option("select[name=from_step]", "persist-facts-1")
    page.fill("textarea[name=params]", '{"steps": 4, "pause": 0.05, "note": "forked"}')
    page.fill("[name=reason]", "Re-run the persist steps with a note.")
    page.get_by_role("button", name="Fork").click()
    page.wait_for_url(re.compile(r"/instances/acme-forkme-fork-1/$"))
    page.wait_for_selector("#instance-header .status-complete", timeout=30_000)
    lineage = page.locator("#lineage-fork-of").inner_text()
    assert "acme-forkme" in lineage and "persist-facts-1" in lineage
    assert "forked" in page.locator("main").inner_text()  # the edited params
    operator.shot("fork-instance")
    page.locator("#lineage-fork-of a").click()
    page.wait_for_url(re.compile(r"/instances/acme-forkme/$"))
    assert "acme-forkme-fork-1" in page.locator("#lineage-forks").inner_text()
    operator.shot("fork-origin-lineage")
    # The copied steps did not run again: their start is the original's, before the fork existed.
    copied = stack.python(
        "from ingest.engine.models import Step; "
        "a = {s.name: s.started_at for s in Step.objects.filter(instance_id='acme-forkme')}; "
        "b = {s.name: s.started_at for s in Step.objects.filter(instance_id='acme-forkme-fork-1')}; "
        "print(sorted(b), all(a[n] == b[n] for n in ('fetch', 'extract')), b['persist-facts-1'] > a['persist-facts-1'])"
    )
    assert copied.strip() == "['extract', 'fetch', 'persist-facts-1', 'persist-facts-2'] True True"
