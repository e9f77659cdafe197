"""`run_until_idle` after a turn whose ledger write failed: the turn is retried at once, as a
worker retries it, not left to its day-long lease."""

from __future__ import annotations

import pytest

from ingest.engine import Workflow, create
from ingest.engine.models import Instance
from ingest.engine.runtime import store_end
from ingest.engine.runtime.records import EngineFault

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


class OneStep(Workflow):
    name = "t-drain-after-fault"

    def run(self, event, step):
        return step.do("only", lambda ctx: "done")


def test_a_turn_whose_last_write_failed_is_retried_and_the_instance_completes(monkeypatch, drain):
    real_finish = store_end.finish
    calls = []

    def finish_failing_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise EngineFault("finish: the connection is lost")
        return real_finish(*args, **kwargs)

    monkeypatch.setattr(store_end, "finish", finish_failing_once)
    create("t-drain-after-fault", id="fault-once", params={})
    turns = drain()
    inst = Instance.objects.get(id="fault-once")
    assert (inst.status, inst.output) == ("complete", "done")
    assert len(calls) == 2 and turns == 2
    assert inst.lease_owner == ""
