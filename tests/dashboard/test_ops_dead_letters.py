"""Dead letters: grouping by signature, per-item retry/replay/discard, bulk redrive with its
estimate; from the operator, viewer and stranger sides. Actions go through the engine services."""

from __future__ import annotations

import html
import json
import re
from decimal import Decimal

import pytest
from test_ops_factories import cost, failed_instance, history_count

from ingest.engine import Workflow
from ingest.engine.models import DeadLetter, Instance

pytestmark = pytest.mark.db


class OpsReplayFlow(Workflow):
    """A registered workflow for the replay tests (replay creates a real instance of it)."""

    name = "ops-test-replay"

    def run(self, event, step):
        return {"ok": True}


def _two_groups():
    a1 = failed_instance(tenant="acme", message="429 from provider after 3.2 s for call 123")
    a2 = failed_instance(tenant="globex", message="429 from provider after 7.9 s for call 456")
    a3 = failed_instance(tenant="acme", message="429 from provider after 1 s for call 9")
    b1 = failed_instance(
        tenant="acme",
        step="persist-facts-3",
        error="IntegrityError",
        message="duplicate key value violates unique constraint 'fact_pkey'",
    )
    return [a1, a2, a3], [b1]


def test_dead_letters_group_by_signature_with_counts_first_last_and_tenants(operator):
    group_a, group_b = _two_groups()
    r = operator.get("/dead-letters/")
    assert r.status_code == 200
    groups = {g.signature: g for g in r.context["groups"]}
    a = groups[group_a[0].signature]
    assert a.count == 3 and a.tenants == ["acme", "globex"]
    assert a.first_seen == min(d.created_at for d in group_a)
    assert a.last_seen == max(d.created_at for d in group_a)
    assert a.normalized_message == "<n> from provider after <n> s for call <n>"
    assert a.example["instance_id"] in {d.instance_id for d in group_a}
    assert groups[group_b[0].signature].step_shape == "persist-facts-{i}"
    assert r.context["groups"][0].signature == a.signature  # sorted by count
    html = r.content.decode()
    assert "&lt;n&gt; from provider after &lt;n&gt; s for call &lt;n&gt;" in html
    assert "RateLimited" in html and "IntegrityError" in html


def test_a_stranger_sees_no_group_and_gets_404_on_an_item(stranger, viewer):
    group_a, _ = _two_groups()
    assert stranger.get("/dead-letters/").context["groups"] == []
    assert stranger.get(f"/dead-letters/{group_a[0].id}/").status_code == 404
    # the viewer (acme only) sees acme's two, not globex's
    g = next(x for x in viewer.get("/dead-letters/").context["groups"] if x.signature == group_a[0].signature)
    assert g.count == 2 and g.tenants == ["acme"]
    assert viewer.get(f"/dead-letters/{group_a[1].id}/").status_code == 404


def test_a_group_lists_its_items(viewer):
    group_a, _ = _two_groups()
    r = viewer.get(f"/dead-letters/?signature={group_a[0].signature}")
    assert {i["instance_id"] for i in r.context["items"]} == {group_a[0].instance_id, group_a[2].instance_id}
    assert "Redrive selected" not in r.content.decode()  # a viewer gets no action buttons


def test_retry_from_the_failed_step_calls_the_engine_and_records_who(operator):
    dl = failed_instance(tenant="acme")
    r = operator.post(f"/dead-letters/{dl.id}/retry/", {"reason": "provider recovered"})
    assert r.status_code == 302
    dl.refresh_from_db()
    assert dl.state == "redriven" and dl.resolved_by == "operator"
    assert Instance.objects.get(id=dl.instance_id).status == "queued"
    assert (
        history_count(instance_id=dl.instance_id, kind="operator", actor="operator", reason="provider recovered") == 1
    )


def test_actions_need_a_reason(operator):
    dl = failed_instance(tenant="acme")
    operator.post(f"/dead-letters/{dl.id}/retry/", {"reason": ""})
    operator.post(f"/dead-letters/{dl.id}/discard/", {"reason": "  "})
    dl.refresh_from_db()
    assert dl.state == "open"


def test_viewers_and_strangers_cannot_act(viewer, stranger):
    dl = failed_instance(tenant="acme")
    assert viewer.post(f"/dead-letters/{dl.id}/retry/", {"reason": "x"}).status_code == 403
    assert viewer.post(f"/dead-letters/{dl.id}/discard/", {"reason": "x"}).status_code == 403
    assert viewer.get(f"/dead-letters/{dl.id}/replay/").status_code == 403
    assert stranger.post(f"/dead-letters/{dl.id}/retry/", {"reason": "x"}).status_code == 404
    assert (
        stranger.post(f"/dead-letters/{dl.id}/replay/run/", {"reason": "x", "params": "{}", "confirm": "1"}).status_code
        == 404
    )
    assert viewer.get("/dead-letters/redrive/?signature=" + dl.signature).status_code == 403
    assert (
        viewer.post(
            "/dead-letters/redrive/run/", {"signature": dl.signature, "reason": "x", "rate_per_second": "1"}
        ).status_code
        == 403
    )
    dl.refresh_from_db()
    assert dl.state == "open"


def test_posts_are_csrf_protected(db, users):
    from django.test import Client

    c = Client(enforce_csrf_checks=True)
    c.login(username="operator", password="operator")
    dl = failed_instance(tenant="acme")
    assert c.post(f"/dead-letters/{dl.id}/discard/", {"reason": "x"}).status_code == 403
    dl.refresh_from_db()
    assert dl.state == "open"


def test_discard_with_a_reason_closes_the_dead_letter_and_a_second_discard_is_refused(operator):
    dl = failed_instance(tenant="acme")
    operator.post(f"/dead-letters/{dl.id}/discard/", {"reason": "test tenant data"})
    dl.refresh_from_db()
    assert (dl.state, dl.resolution, dl.resolved_by) == ("discarded", "test tenant data", "operator")
    r = operator.post(f"/dead-letters/{dl.id}/discard/", {"reason": "again"}, follow=True)
    assert r.status_code == 200
    assert "already discarded" in r.content.decode()


def test_replay_with_edited_params_shows_the_diff_before_running(operator):
    dl = failed_instance(tenant="acme", workflow="ops-test-replay", params={"call_id": "c1", "limit": 10})
    edited = json.dumps({"call_id": "c1", "limit": 5, "model": "small"})
    r = operator.post(f"/dead-letters/{dl.id}/replay/run/", {"params": edited, "reason": "smaller batch"})
    assert r.status_code == 200
    assert r.context["edited"] is True
    diff = r.context["diff"]
    assert ("del", '-  "limit": 10') in diff and ("add", '+  "limit": 5,') in diff
    assert ("add", '+  "model": "small"') in diff
    assert Instance.objects.filter(replay_of_id=dl.instance_id).count() == 0  # not yet
    r = operator.post(
        f"/dead-letters/{dl.id}/replay/run/", {"params": edited, "reason": "smaller batch", "confirm": "1"}
    )
    new = Instance.objects.get(replay_of_id=dl.instance_id)
    assert new.params == {"call_id": "c1", "limit": 5, "model": "small"}
    assert r.status_code == 302 and r["Location"] == f"/instances/{new.id}/"
    dl.refresh_from_db()
    assert dl.state == "redriven"


def test_replay_of_an_unregistered_workflow_shows_the_engine_refusal(operator):
    dl = failed_instance(tenant="acme", workflow="retired-flow")
    r = operator.post(
        f"/dead-letters/{dl.id}/replay/run/", {"params": "{}", "reason": "x", "confirm": "1"}, follow=True
    )
    assert r.status_code == 200
    assert "no workflow is registered as &#x27;retired-flow&#x27;" in r.content.decode()


def test_replay_refuses_params_that_are_not_a_json_object(operator):
    dl = failed_instance(tenant="acme")
    r = operator.post(f"/dead-letters/{dl.id}/replay/run/", {"params": "[1, 2", "reason": "x", "confirm": "1"})
    assert r.status_code == 400 and "not valid JSON" in r.content.decode()
    r = operator.post(f"/dead-letters/{dl.id}/replay/run/", {"params": "[1]", "reason": "x", "confirm": "1"})
    assert r.status_code == 400 and "JSON object" in r.content.decode()


def test_the_bulk_estimate_counts_instances_and_prices_one_attempt_of_the_failed_step(operator):
    group_a, _ = _two_groups()  # acme: 2 in group a, globex: 1 (operator acts on both)
    # History of llm-extract: attempt 1 of instance x cost 0.02 over two services, attempt 2 cost 0.04.
    x = group_a[0].instance
    cost(instance=x, step="llm-extract", attempt=1, service="openai", amount="0.015000")
    cost(instance=x, step="llm-extract", attempt=1, service="embed", amount="0.005000")
    cost(instance=x, step="llm-extract", attempt=2, service="openai", amount="0.040000")
    cost(instance=x, step="keyword-prefilter", attempt=1, amount="9.000000")  # another step: ignored
    r = operator.get(f"/dead-letters/redrive/?signature={group_a[0].signature}")
    est = r.context["estimate"]
    assert est.instances == 3
    assert est.lines[0]["per_attempt"] == Decimal("0.03")  # (0.02 + 0.04) / 2 attempts
    assert est.total == Decimal("0.09")
    html = r.content.decode()
    assert 'id="redrive-count">3<' in html and 'id="redrive-cost">$0.0900<' in html


def _confirmed(client, query, **form):
    """Preview `query`, then confirm with the preview's token (as the page's form does)."""
    token = client.get(f"/dead-letters/redrive/?{query}").context["token"]
    return client.post("/dead-letters/redrive/run/", {"token": token, **form})


def test_bulk_redrive_retries_the_selection_at_the_chosen_rate(operator):
    group_a, group_b = _two_groups()
    r = _confirmed(operator, f"signature={group_a[0].signature}", rate_per_second="2", reason="provider back")
    assert r.status_code == 302
    states = dict(DeadLetter.objects.values_list("id", "state"))
    assert all(states[d.id] == "redriven" for d in group_a)
    assert states[group_b[0].id] == "open"
    starts = sorted(Instance.objects.filter(id__in=[d.instance_id for d in group_a]).values_list("ready_at", flat=True))
    assert (starts[-1] - starts[0]).total_seconds() == pytest.approx(1.0, abs=0.05)  # 3 at 2/s


def test_bulk_redrive_of_selected_items_touches_only_them(operator):
    group_a, _ = _two_groups()
    pick = group_a[0]
    r = operator.get(f"/dead-letters/redrive/?signature={pick.signature}&ids={pick.id}")
    assert r.context["estimate"].instances == 1
    _confirmed(operator, f"signature={pick.signature}&ids={pick.id}", rate_per_second="5", reason="one")
    assert DeadLetter.objects.get(id=pick.id).state == "redriven"
    assert DeadLetter.objects.get(id=group_a[2].id).state == "open"


def test_bulk_redrive_leaves_out_tenants_where_the_user_only_reads(db, users):
    from django.test import Client

    from dashboard.access import user_ensure

    user_ensure(username="mixed", password="mixed", memberships=[("acme", "operator"), ("globex", "viewer")])
    c = Client()
    c.login(username="mixed", password="mixed")
    group_a, _ = _two_groups()
    r = c.get(f"/dead-letters/redrive/?signature={group_a[0].signature}")
    assert r.context["estimate"].instances == 2 and r.context["skipped"] == 1
    _confirmed(c, f"signature={group_a[0].signature}", rate_per_second="5", reason="r")
    assert DeadLetter.objects.get(id=group_a[1].id).state == "open"  # globex's


def test_a_groups_redrive_link_keeps_the_lists_filters_through_preview_and_confirm(operator):
    group_a, _ = _two_groups()  # group a spans acme (2) and globex (1)
    page = operator.get("/dead-letters/?tenant=globex&q=429").content.decode()
    link = html.unescape(
        re.search(r'href="(/dead-letters/redrive/\?[^"]*signature=[^"]+)"[^>]*>Redrive…', page).group(1)
    )
    assert "tenant=globex" in link and "q=429" in link
    preview = operator.get(link)
    assert preview.context["estimate"].instances == 1  # what the filtered list shows, not the whole group
    r = operator.post(
        "/dead-letters/redrive/run/",
        {"token": preview.context["token"], "rate_per_second": "5", "reason": "globex only"},
    )
    assert r.status_code == 302
    states = {d.id: DeadLetter.objects.get(id=d.id).state for d in group_a}
    assert [states[d.id] for d in group_a] == ["open", "redriven", "open"]
