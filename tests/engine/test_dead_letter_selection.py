"""The engine's bulk selection is explicit: no selection, an empty id list or a filter without
tenants is refused (never read as "all"); ids and a filter together select their intersection."""

from __future__ import annotations

import pytest

from ingest.engine.errors import InvalidSelection
from ingest.engine.models import DeadLetter, Instance
from ingest.engine.services.dead_letters import (
    DeadLetterFilter,
    dead_letter_redrive,
    dead_letter_select,
)

pytestmark = pytest.mark.django_db


def _letter(n: int, tenant: str, step: str = "transform") -> DeadLetter:
    from django.utils import timezone

    now = timezone.now()
    inst = Instance.objects.create(
        id=f"sel-{n}", workflow="t-pipeline", tenant=tenant, status="errored", params={}, created_at=now, updated_at=now
    )
    return DeadLetter.objects.create(
        instance=inst,
        workflow="t-pipeline",
        tenant=tenant,
        step_name=step,
        error_name="E",
        error_message="m",
        signature=f"s-{step}",
        normalized_message="m",
        created_at=now,
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"ids": []},
        {"ids": ["1"]},
        {"filter": DeadLetterFilter(tenants=())},
        {"filter": DeadLetterFilter(tenants=("",))},
    ],
)
def test_a_selection_that_is_missing_empty_or_untenanted_is_refused(kwargs):
    _letter(1, "acme")
    with pytest.raises(InvalidSelection, match="nothing was done"):
        list(dead_letter_select(**kwargs))
    with pytest.raises(InvalidSelection):
        dead_letter_redrive(actor="ana", **kwargs)
    assert DeadLetter.objects.get().state == "open"


def test_ids_and_a_filter_together_select_only_what_both_allow():
    a, b, c = _letter(1, "acme"), _letter(2, "globex"), _letter(3, "acme", step="load")
    acme = DeadLetterFilter(tenants=("acme",), step_name="transform")
    assert list(dead_letter_select(filter=acme, ids=[a.id, b.id, c.id])) == [a]
    assert dead_letter_redrive(ids=[a.id, b.id, c.id], filter=acme, actor="ana") == 1
    assert dict(DeadLetter.objects.values_list("id", "state")) == {a.id: "redriven", b.id: "open", c.id: "open"}


def test_redrive_counts_only_the_letters_it_actually_redrove():
    a, b = _letter(1, "acme"), _letter(2, "acme")
    Instance.objects.filter(id=b.instance_id).update(status="running")  # retried by someone else
    assert dead_letter_redrive(ids=[a.id, b.id], actor="ana") == 1
