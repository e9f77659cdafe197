"""The domain pages in a browser: a domain onboarded by the worker (demo DataForSEO answers),
its counters, classifications by source stage and cost; its run graph with the fan-out node
and the failed keyword branch marked a fallback; another tenant's domain is missing."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import Session, started_stack
from tests.e2e.servers import Stack, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A stack of its own: on the shared one, instances earlier browser tests left behind queued
    ahead of this onboarding's ~60 url-classify items for minutes (alone it ends in seconds)."""
    with started_stack(tmp_path_factory, "e2e-domains") as s:
        yield s


def login_patiently(browser, stack: Stack, username: str) -> Session:  # type: ignore[no-untyped-def]
    """conftest's login, with a minute for the landing page (its 4.8 MB of Plotly takes long
    on a loaded machine)."""
    page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.set_default_timeout(60_000)
    s = Session(page, stack.base_url)
    s.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", username)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url, wait_until="commit")
    return s


def onboard(stack: Stack, tenant: str, domain: str) -> str:
    out = stack.python(
        "from ingest.workflows.domain_onboard import domain_onboard_start; "
        f"print(domain_onboard_start({tenant!r}, {domain!r}, backlink_limit=30, keyword_limit=30, "
        "referring_domains_limit=30)[0])"
    )
    return out.strip()


def domain_id(stack: Stack, tenant: str, name: str) -> int:
    return int(
        stack.python(
            "from ingest.rankdisco.models import Domain; "
            f"print(Domain.objects.get(tenant={tenant!r}, name={name!r}).id)"
        ).strip()
    )


def test_an_onboarded_domain_shows_its_counters_classifications_and_run_graph(
    operator: Session, browser, stack: Stack
) -> None:
    iid = onboard(stack, "acme", "hooli.example")  # its keyword task fails in the demo's answers
    page = operator.page
    wait_until(
        lambda: (
            "ended"
            in stack.python(
                f"from ingest.engine.models import Instance; i = Instance.objects.get(id={iid!r}); "
                "print('ended' if i.status in ('complete', 'completed_with_errors', 'errored') else i.status)"
            )
        ),
        timeout=200,
        what="the onboarding to end",
    )  # ~60 URLs through the real url-classify

    operator.goto("/domains/")
    row = page.locator("table.data tbody tr", has_text="hooli.example")
    assert "completed_with_errors" in row.inner_text()
    operator.shot("domains-list")

    mine = domain_id(stack, "acme", "hooli.example")
    assert row.locator("a.rowlink").get_attribute("href") == f"/domains/{mine}/"
    operator.goto(f"/domains/{mine}/")
    assert page.locator("h1").inner_text() == "hooli.example"
    kpis = page.locator("section.kpis").inner_text()
    assert "30\nbacklinks" in kpis and "0\nranked keywords" in kpis and "3\nbrand properties" in kpis
    stages = page.locator("section[aria-label='Classifications by source stage'] tbody").inner_text()
    assert "rules" in stages
    costs = page.locator("section[aria-label='Cost by stage'] tbody").inner_text()
    assert "backlinks" in costs and "referring_domains" in costs
    assert "Keyword fetch failed" in page.locator(".error-box").inner_text()
    operator.shot("domain-detail", full_page=True)

    operator.goto(f"/instances/{iid}/")
    # A node of its own, or a cell of the collapsed group of its parallel fetches.
    fallback = page.locator("a.dag-fallback")
    assert fallback.count() == 1
    assert "fetch-keywords" in fallback.inner_text() + (fallback.get_attribute("title") or "")
    fan = page.locator("a.dag-node", has_text="queue-domain-classification")
    assert re.search(r"(\d+)/\1", fan.locator(".fo-n").inner_text())  # every URL landed
    operator.shot("domain-onboard-run-graph")

    stranger = login_patiently(browser, stack, "stranger")
    assert stranger.goto(f"/domains/{mine}/").status == 404
    stranger.goto("/domains/")
    assert "hooli.example" not in stranger.page.locator("main").inner_text()
