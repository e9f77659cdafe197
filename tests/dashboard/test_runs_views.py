"""The runs pages from the three sides: operator, viewer, stranger (another tenant)."""

from __future__ import annotations

import pytest
from ledger_factories import add_history, make_instance, make_run

pytestmark = pytest.mark.db


def test_anonymous_users_are_sent_to_the_login_page(client, db):
    response = client.get("/instances/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/instances/")


def test_the_login_page_logs_a_demo_user_in(client, users):
    response = client.post("/login/", {"username": "viewer", "password": "viewer"})
    assert response.status_code == 302
    assert client.get("/instances/").status_code == 200


def test_the_detail_page_shows_the_run(operator):
    inst = make_instance(status="complete")
    make_run(inst)
    add_history(inst, "operator", actor="operator", reason="customer asked", data={"action": "pause"})
    r = operator.get(f"/instances/{inst.id}/")
    assert r.status_code == 200
    html = r.content.decode()
    assert "fetch-calls" in html and "llm-extract-1" in html
    assert "retry delay 10.0s" in html
    assert "sk-SECRET-VALUE" not in html and "Redacted" in html
    assert "customer asked" in html
    assert "$0.0375" in html  # 0.0125 + 0.025


def test_the_waterfall_places_attempts_and_retry_gaps_by_time(operator):
    from datetime import timedelta

    from ledger_factories import T0

    inst = make_instance("acme-wf", status="complete", created_at=T0)
    steps = make_run(inst)
    steps["secret"].ended_at = T0 + timedelta(seconds=100)  # the run spans exactly 100 s
    steps["secret"].save()
    html = operator.get("/instances/acme-wf/").content.decode()
    # attempt 2 of fetch-calls starts at +11 s: 11 % of the axis; its delay gap runs 12 s → 31 s
    assert 'class="wf-bar failed" style="left:11.000%;width:1.000%"' in html
    assert 'class="wf-gap" style="left:12.000%;width:19.000%" title="retry delay 20.0s"' in html


def test_the_waterfall_axis_reads_in_the_unit_of_the_runs_span():
    from datetime import timedelta

    from ledger_factories import T0

    from dashboard.selectors.run_layout import waterfall
    from ingest.engine.models import Step

    def axis(seconds: float) -> list[str]:
        step = Step(
            name="s", seq=1, kind="do", status="complete", started_at=T0, ended_at=T0 + timedelta(seconds=seconds)
        )
        return [label for _, label in waterfall([(step, [])], start=T0, now=T0)[1]]

    assert axis(0.008) == ["+0.0ms", "+2.0ms", "+4.0ms", "+6.0ms", "+8.0ms"]
    assert axis(0.4) == ["+0ms", "+100ms", "+200ms", "+300ms", "+400ms"]
    assert axis(10) == ["+0.0s", "+2.5s", "+5.0s", "+7.5s", "+10.0s"]
    assert axis(600) == ["+0.0m", "+2.5m", "+5.0m", "+7.5m", "+10.0m"]


def test_parallel_steps_share_a_rank_in_the_run_graph(operator):
    import re

    inst = make_instance("acme-dag", status="complete")
    make_run(inst)
    html = operator.get("/instances/acme-dag/").content.decode()
    dag = html[html.index('id="instance-dag"') : html.index('id="instance-waterfall"')]
    ranks = [re.findall(r'<span class="n" title="([^"]+)"', r) for r in dag.split('class="dag-rank"')[1:]]
    assert ranks == [["fetch-calls"], ["llm-extract-1", "llm-extract-2"], ["load-credentials"]]


def test_htmx_fragment_requests_render_one_section(operator):
    inst = make_instance("acme-frag", status="running")
    make_run(inst)
    r = operator.get("/instances/acme-frag/?fragment=history", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert html.lstrip().startswith('<section id="instance-history"') and "<html" not in html
