"""The instances list's fan-out items and child runs: left out by default ("top-level only"),
listed under their parent (`?parent=`), counted on the parent's row, and the search-attribute
grammar (OR, ranges, negation) over every path the list reads its matches from."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.http import QueryDict
from ledger_factories import T0, make_instance

from dashboard.selectors import InstanceFilters, instance_items
from dashboard.selectors.instance_matches import attribute_rows_filtered, attribute_values_filtered
from ingest.engine.models import FanOut, FanOutItem, Step
from ingest.engine.services.attributes import attributes_set

pytestmark = pytest.mark.db

ROW = re.compile(r'<tr id="row-([^"]+)"')


def _ids(response) -> list[str]:
    assert response.status_code == 200, response.content.decode()[:2000]
    return ROW.findall(response.content.decode())


@pytest.fixture
def ledger(users):
    """p fanned out three items (two landed, one failed) and started child run c; o was p's item
    before p restarted (its fan-out is gone); q is another top-level run."""
    at = lambda m: T0 + timedelta(minutes=m)  # noqa: E731
    p = make_instance("p", status="waiting", created_at=at(0))
    q = make_instance("q", status="complete", workflow="url-classify", created_at=at(1))
    step = Step.objects.create(
        instance=p, name="classify-urls", seq=1, position=1, kind="fan_out", status="waiting", started_at=at(0)
    )
    fan = FanOut.objects.create(
        instance=p,
        step=step,
        step_name="classify-urls",
        handler="url-classify",
        handler_kind="workflow",
        item_workflow="url-classify",
        expected=3,
        created=3,
        received=2,
        failed=1,
        started_at=at(0),
        updated_at=at(2),
        deadline=at(60),
    )
    items = {}
    for i, status in enumerate(["complete", "errored", "running"]):
        items[i] = make_instance(
            f"_fo{fan.id}-{i}",
            status=status,
            workflow="url-classify",
            created_at=at(2 + i),
            parent=p,
            parent_step="classify-urls",
        )
        FanOutItem.objects.create(instance=items[i], fan_out=fan, index=i)
    c = make_instance(
        "p-enrich-1", status="complete", workflow="domain-onboard", created_at=at(6), parent=p, parent_step="enrich"
    )
    Step.objects.create(
        instance=p, name="enrich", seq=1, position=2, kind="child", status="complete", started_at=at(6), child=c
    )
    o = make_instance("_fo999-0", status="complete", workflow="url-classify", created_at=at(7), parent=p)
    attributes_set(instance_id="p", values={"customer": "acme", "amount": "120"})
    attributes_set(instance_id="q", values={"customer": "globex", "amount": "40.5", "region": "us"})
    attributes_set(instance_id=items[0].id, values={"customer": "acme", "amount": "10"})
    attributes_set(instance_id=items[1].id, values={"customer": "globex", "amount": "n/a", "region": "eu"})
    attributes_set(instance_id=o.id, values={"customer": "acme", "region": "eu"})
    return {"p": p, "q": q, "items": [items[k].id for k in range(3)], "c": c.id, "o": o.id, "fan": fan}


def test_the_list_leaves_out_fan_out_items_and_child_runs_by_default(operator, ledger):
    assert _ids(operator.get("/instances/")) == [ledger["o"], "q", "p"]


def test_top_0_lists_them_too_and_a_bad_value_is_named(operator, ledger):
    assert len(_ids(operator.get("/instances/?top=0"))) == 7
    assert len(_ids(operator.get("/instances/?top=1"))) == 3
    r = operator.get("/instances/?top=maybe")
    assert r.status_code == 400 and "top=&#x27;maybe&#x27; is not 1" in r.content.decode()
    assert _ids_any(r) == []


def _ids_any(response) -> list[str]:
    return ROW.findall(response.content.decode())


def test_a_parent_lists_its_items_and_children_and_every_instance_is_listed_exactly_once(operator, ledger):
    under_p = _ids(operator.get("/instances/?parent=p"))
    assert sorted(under_p) == sorted([*ledger["items"], ledger["c"]])
    top = _ids(operator.get("/instances/"))
    assert sorted(top + under_p) == sorted(_ids(operator.get("/instances/?top=0")))
    # The parent filter keeps the other filters.
    assert _ids(operator.get("/instances/?parent=p&status=errored&status=terminated")) == [ledger["items"][1]]


def test_the_parent_row_counts_its_items_by_state_and_links_to_them(operator, ledger):
    got = instance_items(ids=["p", "q"])
    assert set(got) == {"p"}
    run = got["p"]
    assert run.items == 3 and run.children == 1
    assert [(c.label, c.n) for c in run.item_counts] == [("done", 1), ("failed", 1), ("out", 1)]
    assert [(c.label, c.n) for c in run.child_counts] == [("complete", 1)]
    body = operator.get("/instances/").content.decode()
    row = body[body.index('id="row-p"') :]
    row = row[: row.index("</tr>")]
    assert re.search(r'href="/instances/\?parent=p"[^>]*>3 items</a>', row)
    assert 'href="/instances/?parent=p&amp;status=errored&amp;status=terminated">1 failed</a>' in row
    assert "1 child run" in row
    # Each link lists what it counts.
    failed = _ids(operator.get("/instances/?parent=p&status=errored&status=terminated"))
    assert failed == [ledger["items"][1]]


def test_a_stranger_sees_neither_the_items_nor_their_counts(stranger, ledger):
    assert _ids(stranger.get("/instances/?parent=p")) == []
    assert "3 items" not in stranger.get("/instances/").content.decode()


# ---- the attribute grammar over each path ----------------------------------------------------

# Each query's matches among the top-level runs (p, q, o) and among every instance.
GRAMMAR = [
    ("attr=customer:acme", {"p", "o"}, {"p", "o", "item0"}),
    ("attr=customer:acme|globex", {"p", "q", "o"}, {"p", "q", "o", "item0", "item1"}),
    ("attr=amount>=100", {"p"}, {"p"}),
    ("attr=amount>40.5", {"p"}, {"p"}),
    ("attr=amount:10..50", {"q"}, {"q", "item0"}),
    ("attr=amount:..40.5", {"q"}, {"q", "item0"}),
    ("attr=!region:eu", {"p", "q"}, {"p", "q", "item0", "item2", "c"}),
    ("attr=!amount>=100", {"q", "o"}, {"q", "o", "item0", "item1", "item2", "c"}),
    ("attr=customer:acme&attr=!region:eu", {"p"}, {"p", "item0"}),
    ("attr=customer:acme|globex amount<100", {"q"}, {"q", "item0"}),
]
# Each sort makes the list read its matches elsewhere: one attribute's value rows (newest first),
# the attribute rows (a sort by an attribute), the instances (updated: not copied).
SORTS = ["", "&sort=attr.customer", "&sort=-updated"]


def _named(ledger, names: set[str]) -> set[str]:
    real = {"p": "p", "q": "q", "o": ledger["o"], "c": ledger["c"]}
    real.update({f"item{i}": ledger["items"][i] for i in range(3)})
    return {real[n] for n in names}


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize(("query", "top", "every"), GRAMMAR)
def test_or_range_and_negation_match_the_same_runs_whichever_table_answers(operator, ledger, query, top, every, sort):
    assert set(_ids(operator.get(f"/instances/?{query}{sort}"))) == _named(ledger, top)
    assert set(_ids(operator.get(f"/instances/?{query}{sort}&top=0"))) == _named(ledger, every)


def test_the_paths_are_the_ones_the_sorts_choose(users, ledger):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username="operator")
    f = InstanceFilters.from_query(QueryDict("attr=customer:acme|globex&attr=!region:eu"))
    assert attribute_values_filtered(user=user, filters=f) is not None
    f = InstanceFilters.from_query(QueryDict("attr=customer:acme&sort=attr.customer"))
    assert attribute_values_filtered(user=user, filters=f) is None
    assert attribute_rows_filtered(user=user, filters=f) is not None
    # Only negations: an instance without attributes matches, so the instances answer.
    f = InstanceFilters.from_query(QueryDict("attr=!region:eu"))
    assert attribute_rows_filtered(user=user, filters=f) is None


def test_a_bad_attribute_expression_is_a_400_in_the_layout_naming_it(operator, ledger):
    r = operator.get("/instances/?attr=amount>=lots&attr=Region:eu")
    body = r.content.decode()
    assert r.status_code == 400
    assert "&#x27;lots&#x27; is not a number" in body and "Region:eu" in body
    assert '<nav class="mainnav"' in body and _ids_any(r) == []


def test_a_packed_fan_out_s_carriers_are_its_parent_s_items_not_top_level_runs(operator, ledger):
    """A carrier (id `_fo<fan-out>-<first>-<last>`) runs several items: the list shows it under
    its parent, as the items it carries, and not among the top-level runs."""
    fan = ledger["fan"]
    carrier = make_instance(
        f"_fo{fan.id}-3-9",
        status="running",
        workflow="url-classify",
        created_at=T0 + timedelta(minutes=8),
        parent=ledger["p"],
        parent_step="classify-urls",
    )
    attributes_set(instance_id=carrier.id, values={"customer": "acme"})
    assert carrier.id not in _ids(operator.get("/instances/"))
    assert carrier.id not in _ids(operator.get("/instances/?attr=customer:acme"))  # the attribute copies' path
    assert carrier.id in _ids(operator.get("/instances/?parent=p"))
    assert carrier.id in _ids(operator.get("/instances/?top=0"))
