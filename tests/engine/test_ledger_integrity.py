"""The ledger's references hold without database-level checks on the hot-path tables.

Step, Attempt and History rows reference their instance and step without a foreign-key
constraint (models.py, HOT_PATH_REFERENCES): the engine's own writes check the reference, and
deletes cascade through Django. This runs every kind of instance life, then deletes some, and
looks for rows that point at nothing.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from ingest.engine import NonRetryableError, Workflow, create, get
from ingest.engine.clock import clock
from ingest.engine.models import Attempt, History, Instance, Step

pytestmark = pytest.mark.db


class Lives(Workflow):
    name = "t-integrity-lives"

    def run(self, event, step):
        kind = event.payload["kind"]
        step.do("first", lambda ctx: {"n": 1})
        if kind == "flaky":

            def flaky(ctx):
                if ctx.attempt < 3:
                    raise RuntimeError("not yet")
                return "ok"

            step.do("flaky", flaky, retries={"limit": 3, "delay": "1 second", "backoff": "constant"})
        if kind == "fatal":
            step.do("fatal", lambda ctx: (_ for _ in ()).throw(NonRetryableError("no")))
        if kind == "sleep":
            step.sleep("nap", "1 minute")
        if kind == "event":
            step.wait_for_event("approval", type="approve", timeout="1 hour")
        if kind == "child":
            step.child("kid", workflow="t-integrity-lives", params={"kind": "plain"}, id=f"{event.instance_id}-kid")
        return step.do("last", lambda ctx: "done")


ORPHANS = {
    "steps without an instance": """SELECT COUNT(*) FROM engine_step s
        WHERE NOT EXISTS (SELECT 1 FROM engine_instance i WHERE i.id = s.instance_id)""",
    "attempts without a step": """SELECT COUNT(*) FROM engine_attempt a
        WHERE NOT EXISTS (SELECT 1 FROM engine_step s WHERE s.id = a.step_id)""",
    "history without an instance": """SELECT COUNT(*) FROM engine_history h
        WHERE h.instance_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM engine_instance i WHERE i.id = h.instance_id)""",
}


def orphans() -> dict[str, int]:
    with connection.cursor() as cursor:
        found = {}
        for what, query in ORPHANS.items():
            cursor.execute(query)
            found[what] = cursor.fetchone()[0]
        return found


@pytest.mark.django_db
def test_every_kind_of_run_leaves_no_row_pointing_at_nothing_and_deletes_cascade(drain):
    kinds = ["plain", "flaky", "fatal", "sleep", "event", "child"]
    for kind in kinds:
        create("t-integrity-lives", id=f"life-{kind}", params={"kind": kind})
    drain()
    clock.advance(timedelta(minutes=2))
    get("life-event").send_event("approve", {"ok": True})
    drain(advance_clock=True)
    statuses = dict(Instance.objects.filter(id__startswith="life-").values_list("id", "status"))
    assert statuses == {
        "life-plain": "complete",
        "life-flaky": "complete",
        "life-fatal": "errored",
        "life-sleep": "complete",
        "life-event": "complete",
        "life-child": "complete",
        "life-child-kid": "complete",
    }
    # Every written row of these runs is in place: steps, their attempts, and their history.
    assert Step.objects.filter(instance_id="life-flaky", name="flaky").get().attempts == 3
    assert Attempt.objects.filter(step__instance_id="life-flaky", step__name="flaky").count() == 3
    assert History.objects.filter(instance_id="life-plain", kind="step.completed").count() == 2
    assert orphans() == {what: 0 for what in ORPHANS}

    doomed = ["life-flaky", "life-fatal", "life-child"]
    steps_before = Step.objects.filter(instance_id__in=doomed).count()
    assert steps_before > 0
    Instance.objects.filter(id__in=doomed).delete()
    assert Step.objects.filter(instance_id__in=doomed).count() == 0
    assert History.objects.filter(instance_id__in=doomed).count() == 0
    assert Instance.objects.get(id="life-child-kid").parent_id is None  # SET_NULL, not gone
    assert orphans() == {what: 0 for what in ORPHANS}
