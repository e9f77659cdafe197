"""Dead letters grouped by error signature, their items, and the cost of a redrive."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from django.db.models import (
    CharField,
    Count,
    F,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
    Value,
)
from django.db.models.functions import Cast, Concat
from django.http import Http404
from typing_extensions import TypedDict  # pydantic reads it on Python 3.11 (the API's answers)

from dashboard.actions import failed_for_good
from dashboard.charts import step_shape
from dashboard.selectors.common import ZERO, filter_given
from dashboard.staleness import letter_version
from ingest.engine.models import (
    ApiCost,
    DeadLetter,
    DeadLetterState,
    Step,
    StepKind,
    StepStatus,
)

# ---- dead letters ----------------------------------------------------------------------


@dataclass(frozen=True)
class DeadLetterFilters:
    state: str = DeadLetterState.OPEN
    workflow: str = ""
    step: str = ""
    error: str = ""
    tenant: str = ""
    signature: str = ""
    q: str = ""


def _dead_letter_qs(*, tenants: Collection[str], f: DeadLetterFilters) -> QuerySet[DeadLetter]:
    qs = filter_given(
        DeadLetter.objects.filter(tenant__in=tenants),
        [
            ("state", f.state),
            ("workflow", f.workflow),
            ("step_name", f.step),
            ("error_name", f.error),
            ("tenant", f.tenant),
            ("signature", f.signature),
        ],
    )
    if f.q:
        qs = qs.filter(Q(error_message__icontains=f.q) | Q(instance__id__startswith=f.q))  # the id, not the relation
    return qs


class DeadLetterExample(TypedDict):
    """The newest dead letter of a group, shown as its example."""

    id: int
    instance_id: str
    workflow: str
    step_name: str
    error_name: str
    error_message: str
    normalized_message: str
    tenant: str
    created_at: datetime


class DeadLetterItem(TypedDict):
    """One dead letter in the list of a group, and in the API's list."""

    id: int
    instance_id: str
    workflow: str
    tenant: str
    step_name: str
    error_name: str
    error_message: str
    signature: str
    state: str
    created_at: datetime
    resolved_at: datetime | None
    resolved_by: str
    resolution: str
    # Its step raised NonRetryableError (or failed without using its retries): a retry or a
    # redrive runs it on the same input and fails the same way; replay it with edited params.
    non_retryable: bool
    version: str  # what to send back as expected_version to act on it as it is now


@dataclass(frozen=True)
class DeadLetterGroup:
    signature: str
    workflow: str
    step_shape: str
    error_name: str
    normalized_message: str
    count: int
    first_seen: datetime
    last_seen: datetime
    tenants: list[str]
    example: DeadLetterExample
    non_retryable: bool = False  # its example's step failed for good (a group shares its error)


def dead_letters_failed_for_good(*, letters: Collection[tuple[int, str, str]]) -> set[int]:
    """Of these dead letters (id, instance id, error name), the ones whose instance's failed step
    failed for good (dashboard.actions.failed_for_good): retrying them fails the same way."""
    if not letters:
        return set()
    by_instance = {instance_id: letter_id for letter_id, instance_id, _ in letters}
    found = {
        letter_id
        for letter_id, _, error_name in letters
        if failed_for_good(status="errored", error_name=error_name, attempts=0, config={})
    }
    steps = (
        Step.objects.filter(instance_id__in=list(by_instance), status=StepStatus.ERRORED)
        .exclude(kind=StepKind.ROLLBACK)
        .values_list("instance_id", "error_name", "attempts", "config")
    )
    for instance_id, error_name, attempts, config in steps:
        if failed_for_good(
            status="errored",
            error_name=error_name,
            attempts=attempts,
            config=config if isinstance(config, dict) else {},
        ):
            found.add(by_instance[instance_id])
    return found


def dead_letter_groups(
    *, tenants: Collection[str], filters: DeadLetterFilters, sort: str = "count", limit: int = 100
) -> list[DeadLetterGroup]:
    qs = _dead_letter_qs(tenants=tenants, f=filters)
    order = {"count": "-n", "last": "-last", "first": "first"}.get(sort, "-n")
    grouped = list(
        qs.values("signature")
        .annotate(
            n=Count("id"),
            first=Min("created_at"),
            last=Max("created_at"),
            example_id=Max("id"),
        )
        .order_by(order, "signature")[:limit]
    )
    sigs = [g["signature"] for g in grouped]
    tenants_hit: dict[str, list[str]] = defaultdict(list)
    for sig, tenant in qs.filter(signature__in=sigs).values_list("signature", "tenant").distinct().order_by("tenant"):
        tenants_hit[sig].append(tenant)
    examples = {
        d["id"]: d
        for d in DeadLetter.objects.filter(id__in=[g["example_id"] for g in grouped]).values(
            "id",
            "instance_id",
            "workflow",
            "step_name",
            "error_name",
            "error_message",
            "normalized_message",
            "tenant",
            "created_at",
        )
    }
    for_good = dead_letters_failed_for_good(
        letters=[(e["id"], e["instance_id"], e["error_name"]) for e in examples.values()]
    )
    out = []
    for g in grouped:
        ex = examples[g["example_id"]]
        out.append(
            DeadLetterGroup(
                g["signature"],
                ex["workflow"],
                step_shape(ex["step_name"]),
                ex["error_name"],
                ex["normalized_message"],
                g["n"],
                g["first"],
                g["last"],
                tenants_hit[g["signature"]],
                ex,
                ex["id"] in for_good,
            )
        )
    return out


def dead_letter_items(
    *, tenants: Collection[str], filters: DeadLetterFilters, limit: int = 200, ids: Collection[int] | None = None
) -> list[DeadLetterItem]:
    qs = _dead_letter_qs(tenants=tenants, f=filters)
    if ids is not None:
        qs = qs.filter(id__in=list(ids))
    rows = list(
        qs.order_by("-created_at", "-id").values(
            "id",
            "instance_id",
            "workflow",
            "tenant",
            "step_name",
            "error_name",
            "error_message",
            "signature",
            "state",
            "created_at",
            "resolved_at",
            "resolved_by",
            "resolution",
        )[:limit]
    )
    for_good = dead_letters_failed_for_good(letters=[(r["id"], r["instance_id"], r["error_name"]) for r in rows])
    return [
        cast(
            DeadLetterItem,
            {
                **r,
                "non_retryable": r["id"] in for_good,
                "version": letter_version(created_at=r["created_at"], resolved_at=r["resolved_at"]),
            },
        )
        for r in rows
    ]


def dead_letter_ids_visible(*, tenants: Collection[str], ids: Collection[int]) -> set[int]:
    """Which of `ids` exist in `tenants` (in any state)."""
    return set(DeadLetter.objects.filter(tenant__in=tenants, id__in=list(ids)).values_list("id", flat=True))


def dead_letter_tenants(*, ids: Collection[int]) -> list[str]:
    return sorted(set(DeadLetter.objects.filter(id__in=list(ids)).values_list("tenant", flat=True)))


def dead_letter_get(*, tenants: Collection[str], dead_letter_id: int) -> DeadLetter:
    dl = DeadLetter.objects.select_related("instance").filter(tenant__in=tenants, id=dead_letter_id).first()
    if dl is None:
        raise Http404("no such dead letter")
    return dl


def dead_letter_selection_ids(
    *, tenants: Collection[str], filters: DeadLetterFilters, ids: Collection[int] | None = None
) -> list[int]:
    """Open dead letters a bulk action would touch: the filtered set, narrowed to `ids` unless
    `ids` is None. An empty `ids` selects nothing (never "everything")."""
    qs = _dead_letter_qs(tenants=tenants, f=filters).filter(state=DeadLetterState.OPEN)
    if ids is not None:
        qs = qs.filter(id__in=list(ids))
    return list(qs.order_by("id").values_list("id", flat=True))


@dataclass(frozen=True)
class RedriveEstimate:
    instances: int
    total: Decimal
    lines: list[dict[str, Any]] = field(default_factory=list)  # per workflow+step


def step_cost_per_attempt(*, pairs: Collection[tuple[str, str]]) -> dict[tuple[str, str], Decimal]:
    """Average api_costs spend of one attempt of each (workflow, step), from its whole history."""
    if not pairs:
        return {}
    cond = Q()
    for wf, st in pairs:
        cond |= Q(workflow_type=wf, step_name=st)
    # An attempt may record several api_costs rows (one per service): count attempts, not rows.
    attempt_key = Concat(
        F("instance_id"),
        Value(":"),
        Cast("attempt", output_field=CharField()),
        output_field=CharField(),
    )
    rows = (
        ApiCost.objects.filter(cond)
        .values("workflow_type", "step_name")
        .annotate(total=Sum("cost"), attempts=Count(attempt_key, distinct=True))
        .order_by()
    )
    return {(r["workflow_type"], r["step_name"]): (r["total"] / r["attempts"] if r["attempts"] else ZERO) for r in rows}


class RedriveForGood(TypedDict):
    """A dead letter of a redrive's selection whose step failed for good: its redrive fails again."""

    id: int
    instance_id: str
    step_name: str
    error_name: str


def redrive_failed_for_good(*, dead_letter_ids: Collection[int]) -> list[RedriveForGood]:
    """The letters of a selection a redrive cannot help (their step raised NonRetryableError),
    oldest first, for the preview to name and to offer a replay with edited params instead."""
    rows = list(
        DeadLetter.objects.filter(id__in=list(dead_letter_ids))
        .order_by("id")
        .values("id", "instance_id", "step_name", "error_name")
    )
    for_good = dead_letters_failed_for_good(letters=[(r["id"], r["instance_id"], r["error_name"]) for r in rows])
    return [
        RedriveForGood(id=r["id"], instance_id=r["instance_id"], step_name=r["step_name"], error_name=r["error_name"])
        for r in rows
        if r["id"] in for_good
    ]


def redrive_estimate(*, dead_letter_ids: Collection[int]) -> RedriveEstimate:
    """How many instances, and what re-running each failed step once is likely to cost."""
    per_step = list(
        DeadLetter.objects.filter(id__in=dead_letter_ids)
        .values("workflow", "step_name")
        .annotate(n=Count("id"))
        .order_by("workflow", "step_name")
    )
    avg = step_cost_per_attempt(pairs=[(r["workflow"], r["step_name"]) for r in per_step])
    lines, total, count = [], ZERO, 0
    for r in per_step:
        each = avg.get((r["workflow"], r["step_name"]), ZERO)
        subtotal = each * r["n"]
        lines.append({**r, "per_attempt": each, "subtotal": subtotal})
        total += subtotal
        count += r["n"]
    return RedriveEstimate(count, total, lines)
