"""Issue 19's defects, in a real browser at a laptop's 1280 px and a phone's 390 px: a budget
pause with its approval, the demo seen as `operator`, admin rights, error pages in the layout,
the layout at both widths, the run graph and timeline of a wide, sleepy run, exact times,
the costs charts, the action dialog after an error, retry of a step that cannot succeed, and
the overview's tiles linking with their window."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Session, create, login, status
from tests.e2e.servers import Stack, wait_until

pytestmark = pytest.mark.e2e

WIDTHS = [1280, 390]


@pytest.fixture(params=WIDTHS, ids=lambda w: f"{w}px")
def width(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def op(browser: Any, stack: Stack, width: int) -> Iterator[Session]:
    s = login(browser, stack, "operator", width=width, height=900 if width > 500 else 844, timeout=45_000)
    yield s
    s.page.context.close()


def _fits(s: Session) -> None:
    """Nothing on the page is wider than the window (tables and graphs scroll inside their card)."""
    page = s.page
    width = page.viewport_size["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width, s.page.url
    # the navigation is one row: every link at the same height, none wrapped onto two lines
    tops = page.eval_on_selector_all(".mainnav a", "els => els.map(e => [e.offsetTop, e.offsetHeight])")
    assert len({t for t, _ in tops}) == 1 and max(h for _, h in tops) < 40, tops
    if width > 900:  # ...and on a laptop every link of that row shows, none hidden past its edge
        clipped = page.evaluate("""(() => { const nav = document.querySelector('.mainnav').getBoundingClientRect();
            return [...document.querySelectorAll('.mainnav a')]
                .filter(a => a.getBoundingClientRect().right > nav.right + 1)
                .map(a => a.textContent); })()""")
        assert clipped == [], clipped


def _budget(stack: Stack, instance_id: str) -> None:
    stack.python(
        "from decimal import Decimal; from ingest.engine.services import budgets as services; "
        f"services.budget_upsert(scope='instance', key={instance_id!r}, period='day', "
        "limit=Decimal('0.01'), policy='approval', actor='operator')"
    )


def test_a_budget_paused_instance_shows_no_running_step_and_links_its_approval(op: Session, stack: Stack, width: int):
    iid = f"acme-budget-{width}"
    _budget(stack, iid)
    create(stack, "e2e-budgeted", id=iid)
    wait_until(lambda: status(stack, iid) == "paused", timeout=30, what=f"{iid} to pause for its approval")
    page = op.page
    op.goto(f"/instances/{iid}/")
    assert page.locator("#instance-dag .st-running, #instance-steps .status-running").count() == 0
    assert page.locator('a.dag-node.st-paused[href="#step-llm-extract-1"]').count() == 1
    banner = page.locator(".approval-banner")
    assert "waiting for an approval" in banner.inner_text() and "llm-extract" in banner.inner_text()
    _fits(op)
    op.shot(f"budget-paused-{width}", full_page=True)
    banner.get_by_role("link").click()
    page.wait_for_url(re.compile(r"/approvals/\d+/$"))
    assert iid in page.locator("main").inner_text()
    op.goto("/")
    assert iid not in page.locator("main").inner_text().split("Steps in flight")[1].split("Dead letters")[0]


def test_the_demo_shows_its_dead_letter_and_approval_to_operator(browser: Any, stack: Stack):
    out = stack.python(
        "from ingest.demo.seed import demo_seed; s = demo_seed(calls=8, opportunities=0); "
        "print(s.dead_letter_instance, s.approval_instance)"
    )
    dead, approval = out.split()
    wait_until(
        lambda: status(stack, dead) == "errored" and status(stack, approval) == "paused",
        timeout=90,
        what="the demo's dead letter and approval",
    )
    for persona in ("operator", "viewer"):
        s = login(browser, stack, persona, width=1280, timeout=45_000)
        s.goto("/dead-letters/")
        s.page.locator("#dl-groups tr", has_text="keyword-prefilter").wait_for(timeout=30_000)
        s.goto("/approvals/")
        assert approval in s.page.locator("main").inner_text(), persona
        s.shot(f"demo-approvals-{persona}")
        s.goto(f"/instances/{dead}/")
        assert s.page.locator("#instance-header .status-errored").count() == 1
        s.page.context.close()


def test_admin_has_every_permission_in_the_django_admin(browser: Any, stack: Stack):
    s = login(browser, stack, "admin", width=1280, timeout=45_000)
    s.goto("/admin/")
    text = s.page.locator("#content").inner_text()
    assert "You don’t have permission" not in text and "Users" in text
    assert s.goto("/admin/auth/user/add/").status == 200
    s.shot("admin-index")
    s.page.context.close()


def test_error_pages_wear_the_layout_and_the_api_keeps_json(op: Session, stack: Stack, width: int):
    page = op.page
    assert op.goto("/no-such-page/").status == 404
    assert page.locator("header.topbar .mainnav").count() == 1 and "Not found" in page.locator("h1").inner_text()
    _fits(op)
    op.shot(f"error-404-{width}")
    response = op.goto("/api/no-such-endpoint")
    assert response.status == 404 and json.loads(page.inner_text("body"))["error"]["code"] == "not_found"
    # a form posted without its CSRF token: refused inside the layout, nothing done
    op.goto("/")
    code = page.evaluate("""async () => { const r = await fetch('/instances/x/actions/pause/run/',
        {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'reason=r'});
        return [r.status, await r.text()]; }""")
    assert code[0] == 403 and "Form expired" in code[1] and "mainnav" in code[1]


def test_the_viewer_is_refused_inside_the_layout(browser: Any, stack: Stack, width: int):
    create(stack, "e2e-live-steps", id=f"acme-refused-{width}", params={"steps": 3, "pause": 0.05})
    s = login(browser, stack, "viewer", width=width, timeout=45_000)
    assert s.goto(f"/instances/acme-refused-{width}/actions/pause/").status == 403
    assert "Not allowed" in s.page.locator("h1").inner_text() and s.page.locator(".mainnav").count() == 1
    _fits(s)
    s.shot(f"error-403-{width}")
    s.page.context.close()


def test_every_page_fits_both_widths_for_every_persona(browser: Any, stack: Stack, width: int):
    create(stack, "e2e-live-steps", id=f"acme-fit-{width}", params={"steps": 4, "pause": 0.05})
    wait_until(lambda: status(stack, f"acme-fit-{width}") == "complete", timeout=30, what="acme-fit")
    pages = [
        "/",
        "/workflows/",
        "/workflows/e2e-live-steps/",
        "/dead-letters/",
        "/costs/",
        "/budgets/",
        "/approvals/",
        "/audit/",
        "/alerts/",
        f"/instances/acme-fit-{width}/",
        "/schedules/",
        "/routes/",
        "/workers/",
    ]
    for persona in ("operator", "viewer", "stranger", "admin"):
        s = login(browser, stack, persona, width=width, height=900 if width > 500 else 844, timeout=45_000)
        for path in pages:
            response = s.goto(path)
            assert response.status in (200, 404), (persona, path, response.status)
            s.page.wait_for_load_state("networkidle")
            _fits(s)
            name = path.strip("/").replace("/", "-") or "overview"
            s.shot(f"fit-{persona}-{width}-{name}", full_page=True)
        s.page.context.close()


def test_a_wide_sleepy_run_reads_as_a_group_and_a_cut_timeline(op: Session, stack: Stack, width: int):
    iid = f"acme-fan-{width}"
    create(stack, "e2e-fan-out", id=iid, params={"items": 22, "sleep": 3})
    wait_until(lambda: status(stack, iid) == "complete", timeout=60, what=f"{iid} to complete")
    page = op.page
    op.goto(f"/instances/{iid}/")
    group = page.locator("#instance-dag .dag-group")
    assert group.count() == 1
    assert "persist-facts ×22" in group.inner_text() and "22 complete" in group.inner_text()
    assert group.locator("a.dag-cell").count() == 22
    box = group.bounding_box()
    assert box["width"] <= 270 and box["height"] < 200  # one node, not a row or column of 22
    brk = page.locator("#instance-waterfall .wf-brk-label")
    assert brk.count() == 1 and re.search(r"\d+(\.\d)?s", brk.inner_text())
    # the steps either side of the sleep are readable: publish's bar is not squashed to a sliver
    publish = page.locator(".wf-row", has_text="publish").locator(".wf-bar")
    fetch = page.locator(".wf-row", has_text="fetch").locator(".wf-bar")
    assert publish.bounding_box()["x"] - fetch.bounding_box()["x"] > 0
    _fits(op)
    op.shot(f"run-graph-group-{width}", full_page=True)


def test_history_shows_exact_times_with_the_time_zone_on_request(op: Session, stack: Stack, width: int):
    iid = f"acme-times-{width}"
    create(stack, "e2e-live-steps", id=iid, params={"steps": 3, "pause": 0.05})
    wait_until(lambda: status(stack, iid) == "complete", timeout=30, what=iid)
    page = op.page
    op.goto(f"/instances/{iid}/")
    first = page.locator("#instance-history-list time").first
    assert "ago" in first.inner_text() or "now" in first.inner_text()
    assert re.search(r"\d{2}:\d{2}:\d{2}", first.get_attribute("title") or "")  # hover: absolute
    page.click("[data-time-toggle]")
    assert re.search(r"\d{2}:\d{2}:\d{2}.*(UTC|GMT)", first.inner_text()), first.inner_text()
    assert page.locator("[data-time-toggle]").get_attribute("aria-pressed") == "true"
    op.goto(f"/instances/{iid}/")  # the choice is kept
    assert re.search(r"(UTC|GMT)", page.locator("#instance-history-list time").first.inner_text())
    page.click("[data-time-toggle]")
    assert "ago" in first.inner_text() or "now" in first.inner_text()


def _plot(page: Any, index: int) -> Any:
    return page.evaluate(f"""() => {{ const p = document.querySelectorAll('.js-plotly-plot')[{index}];
        return {{data: p.data.map(t => ({{type: t.type, x: t.x, labels: t.labels, parents: t.parents,
                 xaxis: t.xaxis, yaxis: t.yaxis}})), layout: {{grid: p.layout.grid}}}}; }}""")


def test_costs_draw_series_as_lines_one_burn_down_per_budget_and_the_chosen_treemap(
    op: Session, stack: Stack, width: int
):
    iid = f"acme-cost-{width}"
    create(stack, "e2e-live-steps", id=iid, params={"steps": 3, "pause": 0.05})
    wait_until(lambda: status(stack, iid) == "complete", timeout=30, what=iid)
    for tenant in ("acme", "globex"):
        stack.python(
            "from decimal import Decimal; from ingest.engine.services import budgets as services; "
            f"services.budget_upsert(scope='tenant', key={tenant!r}, period='month', "
            "limit=Decimal('5'), policy='fail', actor='operator')"
        )
    page = op.page
    op.goto("/costs/?window=7d&by=tenant")
    page.wait_for_selector(".js-plotly-plot")
    series = _plot(page, 0)["data"]
    assert series and all(len(t["x"]) > 24 for t in series)  # a line across the week, not a dot
    treemap = _plot(page, 1)["data"][0]
    roots = [label for label, parent in zip(treemap["labels"], treemap["parents"], strict=True) if parent == ""]
    assert set(roots) <= {"acme", "globex", "default", "initech"} and "acme" in roots  # tenant first
    burn = _plot(page, 2)
    axes = [(t["xaxis"], t["yaxis"]) for t in burn["data"]]
    assert len(set(axes)) == len(axes) // 2 >= 2  # a line and its forecast per budget, each on its own axes
    assert burn["layout"]["grid"]["pattern"] == "independent"
    # two abreast on a wide page; stacked below 560 px, where titles and ticks would overprint
    budgets = len(axes) // 2
    columns = 2 if width > 560 else 1
    page.wait_for_function(
        f"() => document.querySelectorAll('.js-plotly-plot')[2].layout.grid.columns === {columns}", timeout=15_000
    )
    burn = _plot(page, 2)
    assert burn["layout"]["grid"]["rows"] == ((budgets + 1) // 2 if columns == 2 else budgets)
    _fits(op)
    op.shot(f"costs-{width}", full_page=True)


def test_an_invalid_action_keeps_its_dialog_and_a_hopeless_retry_offers_replay(op: Session, stack: Stack, width: int):
    iid = f"acme-hopeless-{width}"
    create(stack, "e2e-flaky", id=iid, params={"account": "acme-9", "fixed": False})
    wait_until(lambda: status(stack, iid) == "errored", timeout=30, what=f"{iid} to fail for good")
    page = op.page
    op.goto(f"/instances/{iid}/")
    header = page.locator("#instance-header .actions")
    assert header.get_by_role("link", name="Replay with edited params…").count() == 1
    header.get_by_role("link", name="Retry (fails again)").click()
    dialog = page.locator("#rl-dialog[open]")
    dialog.wait_for()
    assert "will fail the same way" in dialog.inner_text() and "NonRetryableError" in dialog.inner_text()
    dialog.get_by_role("button", name="Retry").click()  # no reason given: refused
    dialog.locator(".errorlist").wait_for()
    assert page.url.endswith(f"/instances/{iid}/")  # still on the instance, dialog open
    assert (
        iid in dialog.locator("#rl-dialog-title").inner_text()
        and "Retry" in dialog.locator("#rl-dialog-title").inner_text()
    )
    box = dialog.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1
    op.shot(f"dialog-after-error-{width}")
    dialog.get_by_role("link", name="Replay with edited params…").click()
    page.wait_for_selector("#rl-dialog[open] textarea[name=params]")
    params = page.locator("#rl-dialog textarea[name=params]")
    params.fill(params.input_value().replace('"fixed": false', '"fixed": true'))
    page.fill("#rl-dialog [name=reason]", "fixed upstream")
    page.click("#rl-dialog button:has-text('Preview replay')")
    page.wait_for_selector("#rl-dialog .diff")
    page.click("#rl-dialog button:has-text('with these params')")
    page.wait_for_url(lambda url: not url.rstrip("/").endswith(iid))  # the replay's own page
    new_id = page.url.rstrip("/").rsplit("/", 1)[1]
    wait_until(lambda: status(stack, new_id) == "complete", timeout=30, what="the replay to complete")


def test_overview_tiles_link_to_the_list_of_their_window(op: Session, stack: Stack, width: int):
    page = op.page
    op.goto("/?window=7d")
    complete = page.locator("a.tile-complete")
    assert complete.get_attribute("href") == "/instances/?status=complete&range=7d"
    assert page.locator("a.tile-running").get_attribute("href") == "/instances/?status=running"
    _fits(op)
    op.shot(f"overview-{width}", full_page=True)
    complete.click()
    page.wait_for_url(re.compile(r"status=complete&range=7d"))


def test_the_step_graph_fits_its_box_and_schedule_actions_stay_in_reach(op: Session, stack: Stack, width: int):
    iid = f"acme-graph-{width}"
    create(stack, "e2e-live-steps", id=iid, params={"steps": 6, "pause": 0.01})
    wait_until(lambda: status(stack, iid) == "complete", timeout=30, what=iid)
    page = op.page
    op.goto("/workflows/e2e-live-steps/")
    svg, wrap = page.locator("svg.wfdag"), page.locator("[data-wfdag-wrap]")
    natural = float(svg.get_attribute("width") or 0)
    assert svg.bounding_box()["width"] <= wrap.bounding_box()["width"]  # fitted: no part hidden past the box
    tools = page.locator("[data-wfdag-tools]")
    assert not tools.is_visible()  # this short chain fits as it is: nothing to offer
    # A box narrower than the graph (a wide workflow on a phone): scaled down to fit, and the
    # actual size one click away.
    wrap.evaluate(f"w => {{ w.style.width = '{natural / 2:.0f}px'; window.dispatchEvent(new Event('resize')); }}")
    tools.wait_for(state="visible")
    assert re.search(r"scaled to \d+% to fit", tools.inner_text()), tools.inner_text()
    assert svg.bounding_box()["width"] <= wrap.bounding_box()["width"]
    tools.get_by_role("button", name="Actual size").click()
    assert tools.get_by_role("button", name="Actual size").get_attribute("aria-pressed") == "true"
    assert abs(svg.bounding_box()["width"] - natural) < 2  # at its size now; the box scrolls
    assert wrap.evaluate("w => w.scrollWidth > w.clientWidth")
    wrap.evaluate("w => { w.style.width = ''; window.dispatchEvent(new Event('resize')); }")
    _fits(op)
    op.shot(f"workflow-graph-{width}")
    name = f"graph-fit-{width}"
    stack.python(
        "from django.utils import timezone; from ingest.triggers.services import schedule_create; "
        f"schedule_create(name={name!r}, workflow='e2e-live-steps', cron_expression='0 3 * * *', "
        "tenant='acme', now=timezone.now())"
    )
    op.goto("/schedules/")
    row = page.locator(f"tr[data-schedule='{name}']")
    for action in ("Run now", "Disable", "Edit"):
        box = row.locator("button, a.btn", has_text=action).first.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (action, box)
    if width < 640:  # each cell under its column's name, not a table to scroll sideways
        shown = row.locator("td[data-label='Next fires']").evaluate(
            "td => [getComputedStyle(td).display, getComputedStyle(td, '::before').content]"
        )
        assert shown == ["block", '"Next fires"'], shown
    _fits(op)
    op.shot(f"schedules-{width}", full_page=True)
