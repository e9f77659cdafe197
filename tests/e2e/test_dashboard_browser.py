"""The dashboard in a real browser over real processes: daphne serves the pages and the websocket,
a separate worker process runs the workflows (tests/e2e/workflows.py), Chromium watches."""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import Session, create, status
from tests.e2e.servers import Stack, wait_until

pytestmark = pytest.mark.e2e

STEPS = ["fetch", "extract", "persist-facts-1", "persist-facts-2", "persist-facts-3", "persist-facts-4"]


def _header_status(s: Session, value: str, *, timeout: float = 30) -> None:
    s.page.wait_for_selector(f"#instance-header .status-{value}", timeout=timeout * 1000)


def test_an_operator_logs_in_and_lands_on_the_overview(browser, stack: Stack):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    anonymous = Session(page, stack.base_url)
    anonymous.goto("/instances/")
    assert "/login/" in page.url  # no page without logging in
    anonymous.shot("login")
    page.fill("input[name=username]", "operator")
    page.fill("input[name=password]", "wrong")
    page.click("button[type=submit]")
    assert "/login/" in page.url
    page.fill("input[name=username]", "operator")
    page.fill("input[name=password]", "operator")
    page.click("button[type=submit]")
    page.wait_for_url(stack.base_url + "/instances/")  # back where the login was asked for
    anonymous.goto("/")
    assert page.locator("h1").inner_text() == "Overview"
    page.wait_for_selector("#live-indicator.live-on", timeout=30_000)
    anonymous.shot("overview")
    context.close()


def test_steps_turn_green_live_without_a_reload(operator: Session, stack: Stack):
    create(stack, "e2e-live-steps", id="acme-live-1", params={"steps": 6, "pause": 0.8})
    operator.goto("/instances/acme-live-1/")
    page = operator.page
    page.evaluate("window.__noReload = 'still the same page'")
    page.wait_for_selector("#live-indicator.live-on", timeout=30_000)
    seen_running = False
    for name in STEPS:
        node = f'a.dag-node[href="#step-{name}-1"]'
        page.wait_for_selector(f"{node}.st-complete", timeout=30_000)
        if name == "persist-facts-1":
            operator.shot("instance-detail-running")
        seen_running |= page.locator("a.dag-node.st-running").count() > 0
    _header_status(operator, "complete")
    assert page.evaluate("window.__noReload") == "still the same page"  # swapped in place
    assert seen_running  # the next step showed as running between the green ones
    assert page.locator("#instance-header").inner_text().count("complete") >= 1
    # Rows arrive one step at a time (appended, then replaced in place): each once, each green.
    page.wait_for_function(
        f"document.querySelectorAll('#instance-steps-list > details summary .status-complete').length === {len(STEPS)}",
        timeout=30_000,
    )
    assert page.locator("#instance-steps-list > details").count() == len(STEPS)
    assert page.locator("#instance-steps-count").inner_text() == f"{len(STEPS)} steps"
    kinds = page.locator("#instance-history-list .k").all_inner_texts()
    assert kinds.count("step.completed") == len(STEPS)  # history rows appended once each
    operator.shot("instance-detail-complete")
    operator.shot("instance-detail-full", full_page=True)


def test_an_answered_approval_lets_the_instance_continue(operator: Session, stack: Stack):
    page = operator.page
    operator.goto("/approvals/")
    page.wait_for_selector("#live-indicator.live-on", timeout=30_000)
    page.evaluate("window.__noReload = 1")
    create(stack, "e2e-needs-approval", id="acme-approve-1", params={"account": "acme"})
    # The request appears in the open inbox by itself (pushed, not polled).
    row = page.locator("#inbox tr", has_text="Publish 3 facts for acme?")
    row.wait_for(timeout=30_000)
    assert page.evaluate("window.__noReload") == 1
    operator.shot("approvals-inbox")
    row.get_by_role("link", name="Answer").click()
    page.wait_for_selector("form button[value=approve]")
    page.fill("input[name=f_max_facts]", "2")
    page.fill("textarea[name=comment]", "Two are enough; the third is a duplicate.")
    operator.shot("approval-form")
    page.click("button[value=approve]")
    page.wait_for_url(re.compile(r"/approvals/$"))
    assert "Approved" in page.locator(".messages").inner_text()
    # The ledger first, then the page: a failure then says which of the two was late.
    wait_until(
        lambda: status(stack, "acme-approve-1") == "complete",
        timeout=30,
        interval=0.5,
        what="the approved instance to complete in the ledger",
    )
    operator.goto("/instances/acme-approve-1/")
    _header_status(operator, "complete")
    assert page.locator('a.dag-node.st-complete[href="#step-publish-1"]').count() == 1
    # A second answer is refused clearly.
    approval_id = stack.python(
        "from ingest.engine.models import ApprovalRequest; "
        "print(ApprovalRequest.objects.get(instance_id='acme-approve-1').id)"
    ).strip()
    response = operator.goto(f"/approvals/{approval_id}/")
    assert response.status == 200, (approval_id, response.status, page.content()[:500])
    assert page.locator("form button[value=approve]").count() == 0
    assert "takes no second answer" in page.locator("main").inner_text()
    operator.shot("approval-answered")


def test_a_dead_letter_replayed_with_an_edited_param_completes(operator: Session, stack: Stack):
    page = operator.page
    operator.goto("/dead-letters/")
    page.wait_for_selector("#live-indicator.live-on", timeout=30_000)
    create(stack, "e2e-flaky", id="acme-flaky-1", params={"account": "acme-7", "fixed": False})
    group = page.locator("#dl-groups tr", has_text="e2e-flaky")
    group.wait_for(timeout=30_000)  # pushed live into the open page
    operator.shot("dead-letters")
    group.get_by_role("link", name="Items").click()
    page.wait_for_selector("input[name=ids]")
    operator.shot("dead-letter-items")
    page.locator("tr", has_text="acme-flaky-1").get_by_role("link", name="Open").click()
    page.wait_for_url(re.compile(r"/dead-letters/\d+/$"))
    operator.shot("dead-letter-detail")
    # A step that raised NonRetryableError: the page offers the replay with edited params first.
    page.get_by_role("link", name="Replay with edited params…").first.click()
    params = page.locator("textarea[name=params]")
    edited = params.input_value().replace('"fixed": false', '"fixed": true')
    assert '"fixed": true' in edited
    params.fill(edited)
    page.fill("[name=reason]", "Account fixed upstream; replaying with fixed=true.")
    page.click("button:has-text('Preview the replay')")
    page.wait_for_selector("button[value='1']")
    assert '"fixed": true' in page.locator("main").inner_text()  # the diff of the edit
    operator.shot("dead-letter-replay-diff")
    page.click("button[value='1']")
    page.wait_for_url(re.compile(r"/instances/[^/]+/$"))
    new_id = page.url.rstrip("/").rsplit("/", 1)[1]
    assert new_id != "acme-flaky-1"
    _header_status(operator, "complete")
    assert "acme-flaky-1" in page.locator("main").inner_text()  # lineage: replayed from
    operator.shot("replayed-instance")


def test_a_viewer_is_refused_an_action(viewer: Session, stack: Stack):
    create(stack, "e2e-live-steps", id="acme-viewer-1", params={"steps": 3, "pause": 0.1})
    wait_until(lambda: status(stack, "acme-viewer-1") == "complete", timeout=30, what="acme-viewer-1 to complete")
    page = viewer.page
    viewer.goto("/instances/acme-viewer-1/")
    assert "Read only" in page.locator("#instance-header").inner_text()
    assert page.locator("#instance-header .actions a").count() == 0
    viewer.shot("instance-detail-viewer")
    # The server refuses too, whatever the page shows: the confirmation and the POST.
    response = viewer.goto("/instances/acme-viewer-1/actions/restart/")
    assert response.status == 403
    viewer.shot("viewer-refused")
    token = page.context.cookies()
    csrf = next(c["value"] for c in token if c["name"] == "csrftoken")
    code = page.evaluate(
        """async (csrf) => (await fetch('/instances/acme-viewer-1/actions/restart/run/',
             {method: 'POST', headers: {'X-CSRFToken': csrf, 'Content-Type': 'application/x-www-form-urlencoded'},
              body: 'reason=not+mine+to+restart'})).status""",
        csrf,
    )
    assert code == 403
    assert status(stack, "acme-viewer-1") == "complete"


def test_another_tenants_instance_is_refused_as_missing(stranger: Session, stack: Stack):
    create(stack, "e2e-live-steps", id="acme-secret-1", params={"steps": 3, "pause": 0.1})
    response = stranger.goto("/instances/acme-secret-1/")
    assert response.status == 404
    stranger.shot("stranger-404")
    assert stranger.goto("/instances/acme-secret-1/actions/pause/").status == 404
    assert "acme-secret-1" not in (stranger.goto("/instances/").text() or "")


def test_every_page_reads_clearly(operator: Session, stack: Stack):
    """Screenshots (1440×900) of the pages the other tests did not already take."""
    create(stack, "e2e-live-steps", id="globex-shots-1", tenant="globex", params={"steps": 4, "pause": 0.1})
    stack.python(
        "from decimal import Decimal; from ingest.engine.services import budgets as services; "
        "services.budget_upsert(scope='tenant', key='acme', period='day', limit=Decimal('0.05'), "
        "policy='approval', actor='operator')"
    )
    wait_until(lambda: status(stack, "globex-shots-1") == "complete", timeout=30, what="globex-shots-1")
    pages = [
        ("/", "overview-with-data"),
        ("/instances/", "instances"),
        ("/instances/?status=complete&tenant=acme", "instances-filtered"),
        ("/workflows/", "workflows"),
        ("/workflows/e2e-live-steps/", "workflow-dag"),
        ("/costs/", "costs"),
        ("/budgets/", "budgets"),
        ("/budgets/new/", "budget-form"),
        ("/approvals/", "approvals"),
    ]
    for path, name in pages:
        response = operator.goto(path)
        assert response.status == 200, path
        operator.page.wait_for_load_state("networkidle")
        operator.shot(name)
    operator.goto("/instances/acme-live-1/")
    operator.page.get_by_role("link", name="Restart").click()
    operator.page.wait_for_selector("#rl-dialog[open]")
    operator.shot("action-confirm-restart")
