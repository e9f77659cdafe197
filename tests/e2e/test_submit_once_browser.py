"""A double click in a real browser: "Replay with these params" clicked a second time while the
first submit is still waiting for its answer sends the form twice, and exactly one replay starts;
both answers lead to that one replay."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.e2e.conftest import Session, create, status
from tests.e2e.servers import Stack, wait_until

pytestmark = pytest.mark.e2e


def test_a_double_click_on_replay_with_these_params_starts_exactly_one_replay(operator: Session, stack: Stack):
    iid = create(stack, "e2e-flaky", id="acme-double-click", params={"account": "acme-7", "fixed": False})
    wait_until(lambda: status(stack, iid) == "errored", timeout=30, what=f"{iid} to fail for good")
    page = operator.page
    operator.goto(f"/instances/{iid}/actions/replay/")  # the dialog as a page: a plain form post
    params = page.locator("textarea[name=params]")
    params.fill(params.input_value().replace('"fixed": false', '"fixed": true'))
    page.fill("[name=reason]", "fixed upstream")
    page.click("button:has-text('Preview replay')")
    page.wait_for_selector(".diff")
    # The server answers each submit at once; the browser gets the first answer only after the
    # second click, as when the first is slow and the operator clicks again.
    # Handlers can interleave: the second one's fetch may come back before the first one's, so
    # which submit is answered is decided by the order the browser sent them, not by the order
    # their answers arrive. The first submit's route stays open; the browser drops it for the
    # second, as it drops a pending navigation when the same form is sent again.
    answers: list[Any] = []
    sent: list[Any] = []

    def through(route: Any) -> None:
        sent.append(route)
        second = len(sent) > 1
        answer = route.fetch(max_redirects=0)
        answers.append(answer)
        if second:
            route.fulfill(response=answer)

    page.route(re.compile(r"/actions/replay/run/$"), through)
    box = page.locator("button:has-text('with these params')").bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    for _ in range(2):  # the second click while the first waits for its answer
        with page.expect_request(re.compile(r"/actions/replay/run/$")):
            page.mouse.click(x, y)
    page.wait_for_url(re.compile(r"/instances/acme-double-click-replay-\d+/$"))
    replays = stack.python(
        "from ingest.engine.models import Instance; "
        f"print(sorted(Instance.objects.filter(replay_of_id={iid!r}).values_list('id', flat=True)))"
    )
    assert replays.strip() == "['acme-double-click-replay-1']"
    assert [a.status for a in answers] == [303, 303]  # both submits reached the server
    assert {a.headers["location"] for a in answers} == {"/instances/acme-double-click-replay-1/"}
    assert page.url.endswith("/instances/acme-double-click-replay-1/")
    operator.shot("double-click-replay")
