"""The instance and its steps: what a run is, where it stands, and each attempt of each step."""

from __future__ import annotations

import re

from django.db import models
from django.db.models import Q

# What an instance id may be: letters, digits, "_" and "-", not starting with "-" (at most 100).
ID_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")


class Status(models.TextChoices):
    """Instance statuses, spelled as Cloudflare Workflows spells them."""

    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    WAITING = "waiting"
    WAITING_FOR_PAUSE = "waitingForPause"
    COMPLETE = "complete"
    # Finished, but degraded gracefully: the run returned a WorkflowResult with errors (results.py).
    COMPLETED_WITH_ERRORS = "completed_with_errors"
    ERRORED = "errored"
    TERMINATED = "terminated"


FINISHED_STATUSES = frozenset({Status.COMPLETE, Status.COMPLETED_WITH_ERRORS, Status.ERRORED, Status.TERMINATED})
# The others, in a fixed order (an index condition and the metrics' gauges name them).
UNFINISHED_STATUSES = (Status.QUEUED, Status.RUNNING, Status.PAUSED, Status.WAITING, Status.WAITING_FOR_PAUSE)


class Control(models.TextChoices):
    """A request an operator left for the worker that holds the instance."""

    NONE = ""
    PAUSE = "pause"
    TERMINATE = "terminate"
    TERMINATE_ROLLBACK = "terminate_rollback"


class Instance(models.Model):
    """One workflow instance: the run ledger's row.

    `ready_at` is the claim clock: an instance is claimable when `ready_at <= now` and it holds
    no live lease. It is NULL when nothing can make progress without outside help (paused,
    finished) and the wake-up time while sleeping, waiting for an event or backing off.
    """

    id = models.CharField(primary_key=True, max_length=100)
    workflow = models.CharField(max_length=200)
    tenant = models.CharField(max_length=100, default="default")
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.QUEUED)
    params = models.JSONField(default=dict)
    output = models.JSONField(null=True, blank=True)
    error_name = models.CharField(max_length=200, blank=True, default="")
    error_message = models.TextField(blank=True, default="")

    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    ready_at = models.DateTimeField(null=True, blank=True)
    priority = models.IntegerField(default=0)
    control = models.CharField(max_length=20, choices=Control.choices, default="", blank=True)
    paused_at = models.DateTimeField(null=True, blank=True)
    # What the instance was before pause: resume restores it.
    paused_from = models.CharField(max_length=20, blank=True, default="")
    paused_ready_at = models.DateTimeField(null=True, blank=True)

    lease_owner = models.CharField(max_length=100, blank=True, default="")
    lease_token = models.CharField(max_length=32, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    generation = models.IntegerField(default=0)  # bumped by restart: new idempotency keys
    run_count = models.IntegerField(default=0)  # how many times a worker picked it up
    concurrency_key = models.CharField(max_length=200, blank=True, default="")

    # Most instances have neither a parent nor a replay origin: partial indexes (below) instead
    # of Django's two full indexes per foreign key, which every claim's row update maintained.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children", db_index=False
    )
    parent_step = models.CharField(max_length=300, blank=True, default="")
    replay_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replays", db_index=False
    )
    # The workflow's `version` when the instance started: replay keeps to that version's path
    # (docs/engine-contract.md, "Versions").
    # db_default too: raw inserts (benches, bulk loads) that name no version get 1, as old rows did.
    workflow_version = models.IntegerField(default=1, db_default=1)
    # A fork (services/forks.py): the instance it was forked from and the step it starts at.
    fork_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks", db_index=False
    )
    fork_step = models.CharField(max_length=300, blank=True, default="", db_default="")

    class Meta:
        indexes = [
            models.Index(fields=["ready_at"], name="instance_claim", condition=Q(ready_at__isnull=False)),
            models.Index(fields=["-created_at", "-id"], name="instance_recent"),
            # Covering: the instances list's capped count over statuses (up to 10,001 matches of
            # the user's tenants) and a status + search attribute filter read this index alone,
            # not one heap page per candidate. status is already a key here, so a transition
            # writes no more index entries than before, only wider ones (0018).
            models.Index(
                fields=["status", "-created_at"], name="instance_status", include=["tenant", "id", "updated_at"]
            ),
            models.Index(fields=["workflow", "-created_at"], name="instance_workflow"),
            models.Index(fields=["tenant", "-created_at"], name="instance_tenant"),
            # The instances list sorted by updated (either way): a page stops after its rows.
            # Partial: a queued or running instance, whose row each claim, heartbeat and step
            # updates, has no entry, so the engine's write path does not maintain it; a filter
            # on the other statuses (errored, paused, waiting…) implies the condition.
            models.Index(
                fields=["updated_at"],
                name="instance_updated",
                condition=~Q(status__in=["queued", "running", "waitingForPause"]),
            ),
            models.Index(fields=["lease_owner"], name="instance_lease", condition=~Q(lease_owner="")),
            # One run's fan-out items and child runs, newest first: the instances list's
            # `?parent=` reads its capped count and page from this index alone (tenant and status
            # included, no heap page per item), and a run's page lists its children oldest first
            # by reading the first entries backwards instead of sorting them all. Partial: most
            # instances have no parent, and their writes never touch it.
            models.Index(
                fields=["parent", "-created_at", "-id"],
                name="instance_parent",
                include=["tenant", "status"],
                condition=Q(parent__isnull=False),
            ),
            models.Index(fields=["replay_of"], name="instance_replay_of", condition=Q(replay_of__isnull=False)),
            models.Index(fields=["fork_of"], name="instance_fork_of", condition=Q(fork_of__isnull=False)),
            # Versions with their counts (workflow page) and the retire check's "any still running?".
            models.Index(fields=["workflow", "workflow_version"], name="instance_workflow_version"),
            # The /metrics gauges (counts by status, the runnable backlog, leases, the waiting
            # instances' ids for their parked reason) read only this: an index-only scan of the
            # unfinished instances, not a heap page each (docs/observability.md, "Scrape time").
            # Every column is one a status change or a claim writes anyway, except
            # lease_expires_at: the heartbeat's update, which touched no indexed column, now
            # writes index entries too. SQLite ignores `include`.
            models.Index(
                fields=["status", "workflow"],
                name="instance_unfinished",
                include=["ready_at", "lease_owner", "lease_expires_at", "id"],
                condition=Q(status__in=UNFINISHED_STATUSES),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow}/{self.id} ({self.status})"


# HOT_PATH_REFERENCES. Step, Attempt and History rows are written several times per step, so
# their references to Instance and Step are not checked by the database: a foreign-key check
# is a locking lookup per row, and it locks the instance's row in a second mode beside the
# guard's FOR SHARE, which makes PostgreSQL create a multixact per statement. The engine's
# writes check the reference themselves (the guard finds the instance's row, or nothing is
# written), deletes cascade through Django, and tests/engine/test_ledger_integrity.py looks for
# orphans after every kind of run.


class StepKind(models.TextChoices):
    DO = "do"
    SLEEP = "sleep"
    WAIT_EVENT = "wait_event"
    CHILD = "child"
    FAN_OUT = "fan_out"
    ROLLBACK = "rollback"


class StepStatus(models.TextChoices):
    RUNNING = "running"
    COMPLETE = "complete"
    ERRORED = "errored"
    SLEEPING = "sleeping"
    WAITING = "waiting"


class Step(models.Model):
    """One step of an instance, keyed by name and occurrence (the Nth call of that name)."""

    # Written only under the lease guard, which locks the instance's row in the same statement:
    # no database-level reference check (see HOT_PATH_REFERENCES below). Indexed by step_occurrence.
    instance = models.ForeignKey(
        Instance, on_delete=models.CASCADE, related_name="steps", db_index=False, db_constraint=False
    )
    name = models.CharField(max_length=256)
    seq = models.IntegerField()  # 1-based occurrence of `name` in the run
    position = models.IntegerField()  # order in which the run asked for its steps
    kind = models.CharField(max_length=12, choices=StepKind.choices, default=StepKind.DO)
    status = models.CharField(max_length=12, choices=StepStatus.choices)
    result = models.JSONField(null=True, blank=True)
    error_name = models.CharField(max_length=200, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    error_traceback = models.TextField(blank=True, default="")
    # The final failure's JSON-safe state ({"args", "attrs"}): replay rebuilds the exception from it.
    error_state = models.JSONField(null=True, blank=True)
    config = models.JSONField(default=dict)
    attempts = models.IntegerField(default=0)
    sensitive = models.BooleanField(default=False)
    has_rollback = models.BooleanField(default=False)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    wake_at = models.DateTimeField(null=True, blank=True)  # sleep end or event-wait deadline
    event_type = models.CharField(max_length=200, blank=True, default="")
    child = models.ForeignKey(
        Instance, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    # What the running attempt has logged so far ({"attempt", "lines", "dropped"}), written while
    # it runs longer than RUNLEDGER_STEP_LOG_SECONDS and cleared when the attempt ends, its lines
    # then kept on the attempt's row (runtime/steplog.py). NULL for almost every step.
    live_log = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["instance", "name", "seq"], name="step_occurrence"),
        ]
        indexes = [
            # Only running steps: a step inserted complete (most of them) adds no entry here.
            models.Index(fields=["started_at"], name="step_running", condition=Q(status="running")),
            models.Index(fields=["child"], name="step_child", condition=Q(child__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.instance_id}:{self.name}#{self.seq}"


class AttemptWait(models.TextChoices):
    """The error names an attempt is stored under when it waited rather than failed: it does not
    count against its step's retries, and the console draws it as a wait, not a failure."""

    AWAITING_APPROVAL = "AwaitingApproval"  # paused until an operator answers a budget approval
    BUDGET_HELD = "BudgetHeld"  # waited for other steps' budget holds (costs/budgets.py)
    CIRCUIT_OPEN = "CircuitOpen"  # waited for an outbound key's circuit breaker to let a call through


class Attempt(models.Model):
    """Every attempt of a `step.do`: when it ran, how it ended, and the delay before the next."""

    # Inserted in the same statement as its step (HOT_PATH_REFERENCES); indexed by attempt_number.
    step = models.ForeignKey(
        Step, on_delete=models.CASCADE, related_name="attempt_rows", db_index=False, db_constraint=False
    )
    number = models.IntegerField()
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    ok = models.BooleanField(default=False)
    error_name = models.CharField(max_length=200, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    error_traceback = models.TextField(blank=True, default="")
    retry_delay_seconds = models.FloatField(null=True, blank=True)
    worker = models.CharField(max_length=100, blank=True, default="")
    # What the attempt's code logged, bounded and redacted ({"lines": [...], "dropped": n}); NULL
    # when it logged nothing (runtime/steplog.py). Written by the write that ends the attempt.
    logs = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["step", "number"], name="attempt_number"),
        ]
