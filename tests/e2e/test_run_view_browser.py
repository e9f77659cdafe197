"""Reading a run in a real browser at a laptop's 1280 px and a phone's 390 px: the run graph fits
its box (every node inside it, a fan-out one node with its counts, zoom and Fit), and a running
step's log line arrives under the step live, then stays with its attempt when the step ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Session, create, login, status
from tests.e2e.servers import Stack, wait_until
from tests.e2e.test_operator_console import _fits

pytestmark = pytest.mark.e2e


@pytest.fixture(params=[1280, 390], ids=lambda w: f"{w}px")
def width(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def op(browser: Any, stack: Stack, width: int) -> Iterator[Session]:
    s = login(browser, stack, "operator", width=width, height=900 if width > 500 else 844, timeout=45_000)
    yield s
    s.page.context.close()


GRAPH = """(() => {
  const card = document.querySelector('#instance-dag').getBoundingClientRect();
  const view = document.querySelector('#instance-dag [data-dag-view]');
  const box = view.getBoundingClientRect();
  const nodes = [...document.querySelectorAll('#instance-dag .dag-node')].map(n => n.getBoundingClientRect());
  const outside = nodes.filter(r => r.left < card.left - 0.5 || r.right > card.right + 0.5
                                 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5);
  return {nodes: nodes.length, outside: outside.length, card: card.width,
          scrolls: view.scrollWidth > view.clientWidth + 1 || view.scrollHeight > view.clientHeight + 1,
          nodeWidth: Math.max(...nodes.map(r => r.width)),
          level: document.querySelector('#instance-dag [data-dag-level]').textContent};
})()"""


def test_the_graph_fits_its_box_and_a_running_steps_log_line_arrives_live(
    op: Session, stack: Stack, width: int, tmp_path: Path
):
    iid = f"acme-export-{width}"
    gate = tmp_path / "open"
    create(stack, "e2e-logged-export", id=iid, params={"gate": str(gate)})
    page = op.page
    op.goto(f"/instances/{iid}/")
    page.wait_for_selector("#live-indicator.live-on", timeout=30_000)
    page.evaluate("window.__noReload = 'the same page'")

    # The export logs a line and runs on: the line arrives beside the running step, no reload.
    live = page.locator("#step-export-1 .step-liveline")
    live.wait_for(timeout=30_000)
    assert "exporting 3 pages to the warehouse" in live.inner_text()
    assert status(stack, iid) == "running"
    assert page.locator('#instance-dag a.dag-node.st-running[href="#step-export-1"]').count() == 1
    page.locator("#step-export-1 > summary").click()
    running = page.locator("#step-export-1 .steplog[data-running]")
    assert "exporting 3 pages to the warehouse" in running.inner_text() and "updated live" in running.inner_text()

    # The graph: eight steps in a row, the four enrichments that ran together as one node with its
    # counts, the export; every node inside the card, the whole graph shown without scrolling.
    group = page.locator("#instance-dag .dag-group")
    assert group.count() == 1
    assert "enrich-* ×4" in group.inner_text() and "4 complete" in group.inner_text()
    graph = page.evaluate(GRAPH)
    assert graph["nodes"] == 10 and graph["outside"] == 0 and not graph["scrolls"], graph
    op.shot(f"run-view-running-{width}", full_page=True)

    # Zoom in twice: bigger nodes; Fit: all of it inside the box again.
    page.locator('#instance-dag [data-dag-zoom="in"]').click()
    page.locator('#instance-dag [data-dag-zoom="in"]').click()
    zoomed = page.evaluate(GRAPH)
    assert zoomed["nodeWidth"] > graph["nodeWidth"] and zoomed["level"] != graph["level"], (graph, zoomed)
    page.locator('#instance-dag [data-dag-zoom="fit"]').click()
    refit = page.evaluate(GRAPH)
    assert refit["outside"] == 0 and not refit["scrolls"] and refit["level"] == graph["level"], refit

    # The export ends: its lines are kept with its attempt, the step the operator opened stays open.
    gate.write_text("go")
    wait_until(lambda: status(stack, iid) == "complete", timeout=60, what=f"{iid} to complete")
    page.wait_for_selector('#instance-dag a.dag-node.st-complete[href="#step-publish-1"]', timeout=30_000)
    page.wait_for_selector("#step-export-1 .steplog:not([data-running])", timeout=30_000)
    kept = page.locator("#step-export-1 .steplog").inner_text()
    assert "exporting 3 pages to the warehouse" in kept and "export done" in kept
    assert page.evaluate("document.getElementById('step-export-1').open")
    assert page.evaluate("window.__noReload") == "the same page"
    final = page.evaluate(GRAPH)
    assert final["nodes"] == 11 and final["outside"] == 0 and not final["scrolls"], final
    _fits(op)
    op.shot(f"run-view-complete-{width}", full_page=True)
