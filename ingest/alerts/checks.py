"""The time-based half of alerting: conditions that are true for a while rather than events
(a budget past a level, an approval overdue, a backlog aging, no live worker, a 5xx rate, a
dead-letter group growing), checked every round for each enabled rule; each one fires while
its condition holds and resolves when it no longer does."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from django.db.models import CharField, Exists, Min, OuterRef, Value
from django.db.models.functions import Cast, Concat

from ingest.alerts.conditions import Signal, budget_level, rate_exceeded
from ingest.alerts.firing import alert_fire, alert_resolve, summaries_send
from ingest.alerts.models import Alert, AlertState, Condition, IngressError, Rule
from ingest.engine.models import (
    ApprovalRequest,
    ApprovalState,
    Budget,
    BudgetScope,
    DeadLetter,
    DeadLetterState,
    History,
    HistoryKind,
    Instance,
    Status,
)

EXPIRED_TOLD_WITHIN = timedelta(days=1)  # an expired approval older than this is not escalated late
ROUND_CAP = 200  # approvals of each state one check round considers
Check = Callable[[Rule, datetime], tuple[list[Signal], set[str]]]
# A check returns the signals that hold now and the groups it looked at; a firing alert of the
# rule in a group it looked at without a signal resolves (a group it did not look at stays).


def _minutes(rule: Rule) -> timedelta:
    return timedelta(minutes=int(rule.params.get("minutes", 5)))


def dead_letter_growth(rule: Rule, now: datetime) -> tuple[list[Signal], set[str]]:
    workflow = rule.params.get("workflow") or ""
    qs = DeadLetter.objects.filter(tenant=rule.tenant, created_at__gte=now - _minutes(rule))
    if workflow:
        qs = qs.filter(workflow=workflow)
    count, group = qs.count(), f"growth:{workflow or '*'}"
    if count < int(rule.params["count"]):
        return [], {group}
    title = f"{count} dead letters in {rule.params['minutes']} min ({workflow or 'all workflows'})"
    return [Signal(rule.condition, rule.tenant, group, title, workflow, {"count": count})], {group}


def dead_letter_signature_gone(rule: Rule, now: datetime) -> tuple[list[Signal], set[str]]:
    """New-signature alerts fire from the follower; they resolve here once no letter is open."""
    looked, holding = set(), []
    for group in Alert.objects.filter(rule=rule, state=AlertState.FIRING).values_list("group_key", flat=True):
        looked.add(group)
        if DeadLetter.objects.filter(
            tenant=rule.tenant, state=DeadLetterState.OPEN, signature=group.removeprefix("signature:")
        ).exists():
            holding.append(Signal(rule.condition, rule.tenant, group, "", ""))
    return holding, looked


def budget_threshold(rule: Rule, now: datetime) -> tuple[list[Signal], set[str]]:
    percent = int(rule.params["percent"])
    signals, looked = [], set()
    for b in Budget.objects.filter(scope=BudgetScope.TENANT, key=rule.tenant, enabled=True):
        group = f"budget:{b.id}:{percent}"
        looked.add(group)
        if budget_level(spent=float(b.spent), limit=float(b.limit), percent=percent):
            title = f"budget {b.scope}:{b.key} per {b.period} at {percent} % ({b.spent} of {b.limit})"
            signals.append(
                Signal(
                    rule.condition,
                    rule.tenant,
                    group,
                    title,
                    "",
                    {"budget": b.id, "spent": str(b.spent), "limit": str(b.limit), "percent": percent},
                )
            )
    return signals, looked


def approval_overdue(rule: Rule, now: datetime) -> tuple[list[Signal], set[str]]:
    """An approval past its deadline, told to its escalation once. Pending ones hold until
    answered. One that expired holds for the round that tells of it: the instance wakes at the
    timeout and marks its request expired at once, long before a check every few seconds would
    see it pending, and it was overdue all the same, whether or not the workflow catches the
    timeout. An expiry is told only if the rule was there when the deadline passed, within a day."""
    workflow = rule.params.get("workflow") or ""
    qs = ApprovalRequest.objects.filter(tenant=rule.tenant, due_at__lt=now)
    if workflow:
        qs = qs.filter(workflow=workflow)
    pending = list(qs.filter(state=ApprovalState.PENDING).order_by("due_at")[:ROUND_CAP])
    since = max(rule.created_at, now - EXPIRED_TOLD_WITHIN)
    # Those already told are left out in the query, not after the cap: a burst of more expiries
    # than one round takes is told over the next rounds instead of stalling on the first ones.
    told = Alert.objects.filter(rule=rule, group_key=Concat(Value("approval:"), Cast(OuterRef("id"), CharField())))
    expired = list(
        qs.filter(state=ApprovalState.EXPIRED, due_at__gte=since).exclude(Exists(told)).order_by("due_at")[:ROUND_CAP]
    )
    signals = [_overdue_signal(rule, a) for a in pending + expired]
    looked = {s.group_key for s in signals} | _firing_groups(rule)
    return signals, looked


def _overdue_signal(rule: Rule, a: ApprovalRequest) -> Signal:
    return Signal(
        rule.condition,
        rule.tenant,
        f"approval:{a.id}",
        f"approval overdue: {a.title}"[:300],
        a.workflow,
        {
            "instance": a.instance_id,
            "approval": a.id,
            "due_at": a.due_at.isoformat() if a.due_at else "",
            "escalation": a.escalation,
            "state": a.state,
        },
    )


def approval_answered(rule: Rule, now: datetime) -> tuple[list[Signal], set[str]]:
    """Approval-created alerts fire from the follower; they resolve once the approval is not pending."""
    looked = _firing_groups(rule)
    ids = [int(g.removeprefix("approval:")) for g in looked]
    pending = set(ApprovalRequest.objects.filter(id__in=ids, state=ApprovalState.PENDING).values_list("id", flat=True))
    return [Signal(rule.condition, rule.tenant, f"approval:{i}", "", "") for i in pending], looked


def backlog_age(rule: Rule, now: datetime) -> tuple[list[Signal], set[str]]:
    oldest = (
        Instance.objects.filter(
            tenant=rule.tenant, ready_at__lte=now, status__in=[Status.QUEUED, Status.RUNNING, Status.WAITING]
        )
        .filter(lease_token="")
        .aggregate(oldest=Min("ready_at"))["oldest"]
    )
    if oldest is None or now - oldest < _minutes(rule):
        return [], {"backlog"}
    age = int((now - oldest).total_seconds())
    return [
        Signal(
            rule.condition,
            rule.tenant,
            "backlog",
            f"runnable backlog {age} s old",
            "",
            {"oldest_ready_at": oldest.isoformat(), "age_seconds": age},
        )
    ], {"backlog"}


def no_live_worker(rule: Rule, now: datetime) -> tuple[list[Signal], set[str]]:
    """As /readyz judges it: a live lease or a claim within T is a worker; with neither, work
    due for longer than T means none is there (an idle system with nothing due is not alerted)."""
    within = _minutes(rule)
    alive = (
        Instance.objects.exclude(lease_owner="").filter(lease_expires_at__gt=now).exists()
        or History.objects.filter(
            created_at__gte=now - within, kind=HistoryKind.INSTANCE_STATUS, status=Status.RUNNING
        ).exists()
    )
    overdue = Instance.objects.filter(ready_at__lte=now - within, lease_token="").exists()
    if alive or not overdue:
        return [], {"workers"}
    return [
        Signal(rule.condition, rule.tenant, "workers", f"no live worker for {rule.params['minutes']} min", "", {})
    ], {"workers"}


def ingress_5xx_rate(rule: Rule, now: datetime) -> tuple[list[Signal], set[str]]:
    since = now - _minutes(rule)
    errors = IngressError.objects.filter(tenant=rule.tenant, created_at__gte=since).count()
    successes = History.objects.filter(
        tenant=rule.tenant, kind=HistoryKind.INSTANCE_CREATED, created_at__gte=since, actor__startswith="ingress:"
    ).count()
    if not rate_exceeded(
        errors=errors, successes=successes, percent=int(rule.params["percent"]), min_count=int(rule.params["min_count"])
    ):
        return [], {"ingress"}
    share = round(100 * errors / (errors + successes), 1)
    return [
        Signal(
            rule.condition,
            rule.tenant,
            "ingress",
            f"ingress 5xx at {share} % ({errors} errors)",
            "",
            {"errors": errors, "started": successes, "percent": share},
        )
    ], {"ingress"}


def _firing_groups(rule: Rule) -> set[str]:
    return set(Alert.objects.filter(rule=rule, state=AlertState.FIRING).values_list("group_key", flat=True))


CHECKS: dict[str, Check] = {
    Condition.DEAD_LETTER_GROWTH: dead_letter_growth,
    Condition.DEAD_LETTER_NEW_SIGNATURE: dead_letter_signature_gone,
    Condition.BUDGET_THRESHOLD: budget_threshold,
    Condition.APPROVAL_OVERDUE: approval_overdue,
    Condition.APPROVAL_CREATED: approval_answered,
    Condition.BACKLOG_AGE: backlog_age,
    Condition.NO_LIVE_WORKER: no_live_worker,
    Condition.INGRESS_5XX_RATE: ingress_5xx_rate,
}
# Signals of these conditions only keep an alert firing; they never open one (the follower does).
KEEP_ONLY = frozenset({Condition.DEAD_LETTER_NEW_SIGNATURE, Condition.APPROVAL_CREATED})


def checks_round(*, now: datetime) -> int:
    """Every enabled rule with a time-based check, then the summaries due; alerts fired."""
    fired = 0
    for rule in Rule.objects.filter(enabled=True, condition__in=list(CHECKS)):
        signals, looked = CHECKS[rule.condition](rule, now)
        holding = {s.group_key for s in signals}
        if rule.condition not in KEEP_ONLY:
            for signal in signals:
                if _is_new(rule, signal):
                    alert_fire(rule=rule, signal=signal, now=now)
                    fired += 1
        for alert_id in Alert.objects.filter(
            rule=rule, state=AlertState.FIRING, group_key__in=looked - holding
        ).values_list("id", flat=True):
            alert_resolve(alert_id=alert_id, now=now)
    summaries_send(now=now)
    return fired


def _is_new(rule: Rule, signal: Signal) -> bool:
    """A condition that holds round after round is one event, not one per round."""
    return not Alert.objects.filter(rule=rule, group_key=signal.group_key, state=AlertState.FIRING).exists()
