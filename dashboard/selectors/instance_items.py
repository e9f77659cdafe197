"""What the runs shown on a page of the instances list started: their fan-out items and child
runs, counted by state, so a top-level row says what it fanned out and links to those items (the
list filtered by `parent`) instead of the items flooding the list.

Fan-out items are counted from their fan-outs' aggregates (engine_fanout: expected, received,
failed, which every item's outcome updates), one row per fan-out: a parent of 10,000 items costs
what a parent of 10 costs. Child runs are few per run (one per `step.child` call) and are counted
by their own status."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.db.models import Sum

from dashboard.selectors.instance_matches import items_exist
from ingest.engine.models import FanOut, Status, Step

# The instance statuses each fan-out item count stands for, as the list's status filter takes them.
ITEM_STATES: dict[str, tuple[str, ...]] = {
    "done": (Status.COMPLETE, Status.COMPLETED_WITH_ERRORS),
    "failed": (Status.ERRORED, Status.TERMINATED),
    "out": (Status.QUEUED, Status.RUNNING, Status.PAUSED, Status.WAITING, Status.WAITING_FOR_PAUSE),
}


@dataclass(frozen=True)
class ItemCount:
    label: str  # "done", "failed", "out", or a child run's status
    n: int
    query: str  # the list's query that shows these items


@dataclass
class RunItems:
    """A run's fan-out items and child runs: how many, by state, with the list's link to each."""

    parent: str
    items: int = 0  # fan-out items expected
    children: int = 0
    item_counts: list[ItemCount] = field(default_factory=list)
    child_counts: list[ItemCount] = field(default_factory=list)

    @property
    def query(self) -> str:
        return urlencode({"parent": self.parent})


def _query(parent: str, statuses: tuple[str, ...]) -> str:
    return urlencode([("parent", parent), *(("status", s) for s in statuses)])


def instance_items(*, ids: list[str]) -> dict[str, RunItems]:
    """{run id: its items} for the runs of `ids` that fanned out or started child runs. The ids
    are the page's rows, already scoped to the user's tenants; items share their parent's tenant."""
    if not ids or not items_exist():
        return {}
    out: dict[str, RunItems] = {}
    fan_outs = (
        FanOut.objects.filter(instance_id__in=ids)
        .values("instance_id")
        .annotate(expected=Sum("expected"), received=Sum("received"), failed=Sum("failed"))
        .order_by()
    )
    for f in fan_outs:
        parent = str(f["instance_id"])
        expected, received, failed = int(f["expected"] or 0), int(f["received"] or 0), int(f["failed"] or 0)
        run = out.setdefault(parent, RunItems(parent))
        run.items = expected
        for label, n in (("done", received - failed), ("failed", failed), ("out", expected - received)):
            if n > 0:
                run.item_counts.append(ItemCount(label, n, _query(parent, ITEM_STATES[label])))
    children: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    # step_child holds the steps that started one; a child that was since deleted leaves child NULL.
    for parent, status in Step.objects.filter(instance_id__in=ids, child__isnull=False).values_list(
        "instance_id", "child__status"
    ):
        if status:
            children[str(parent)][str(status)] += 1
    for parent, by_status in children.items():
        run = out.setdefault(parent, RunItems(parent))
        run.children = sum(by_status.values())
        run.child_counts = [ItemCount(s, n, _query(parent, (s,))) for s, n in sorted(by_status.items())]
    return out
