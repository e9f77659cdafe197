"""The run ledger: every table the engine owns. The single source of truth for the dashboard.

Writes go through `ingest.engine.services` and the worker; nothing else updates these rows.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models import Q


class Status(models.TextChoices):
    """Instance statuses, spelled as Cloudflare Workflows spells them."""

    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    WAITING = "waiting"
    WAITING_FOR_PAUSE = "waitingForPause"
    COMPLETE = "complete"
    ERRORED = "errored"
    TERMINATED = "terminated"


FINISHED_STATUSES = frozenset({Status.COMPLETE, Status.ERRORED, Status.TERMINATED})


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
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
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

    class Meta:
        indexes = [
            models.Index(fields=["ready_at"], name="instance_claim", condition=Q(ready_at__isnull=False)),
            models.Index(fields=["-created_at", "-id"], name="instance_recent"),
            models.Index(fields=["status", "-created_at"], name="instance_status"),
            models.Index(fields=["workflow", "-created_at"], name="instance_workflow"),
            models.Index(fields=["tenant", "-created_at"], name="instance_tenant"),
            models.Index(fields=["lease_owner"], name="instance_lease", condition=~Q(lease_owner="")),
            models.Index(fields=["parent"], name="instance_parent", condition=Q(parent__isnull=False)),
            models.Index(fields=["replay_of"], name="instance_replay_of", condition=Q(replay_of__isnull=False)),
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
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="steps",
                                 db_index=False, db_constraint=False)
    name = models.CharField(max_length=256)
    seq = models.IntegerField()  # 1-based occurrence of `name` in the run
    position = models.IntegerField()  # order in which the run asked for its steps
    kind = models.CharField(max_length=12, choices=StepKind.choices, default=StepKind.DO)
    status = models.CharField(max_length=12, choices=StepStatus.choices)
    result = models.JSONField(null=True, blank=True)
    error_name = models.CharField(max_length=200, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    error_traceback = models.TextField(blank=True, default="")
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


class Attempt(models.Model):
    """Every attempt of a `step.do`: when it ran, how it ended, and the delay before the next."""

    # Inserted in the same statement as its step (HOT_PATH_REFERENCES); indexed by attempt_number.
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="attempt_rows",
                             db_index=False, db_constraint=False)
    number = models.IntegerField()
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    ok = models.BooleanField(default=False)
    error_name = models.CharField(max_length=200, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    error_traceback = models.TextField(blank=True, default="")
    retry_delay_seconds = models.FloatField(null=True, blank=True)
    worker = models.CharField(max_length=100, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["step", "number"], name="attempt_number"),
        ]


class HistoryKind(models.TextChoices):
    INSTANCE_CREATED = "instance.created"
    INSTANCE_STATUS = "instance.status"
    STEP_STARTED = "step.started"
    STEP_COMPLETED = "step.completed"
    STEP_RETRY = "step.retry"
    STEP_FAILED = "step.failed"
    STEP_SLEEP = "step.sleep"
    STEP_WAIT = "step.wait"
    EVENT_RECEIVED = "event.received"
    COST_RECORDED = "cost.recorded"
    BUDGET = "budget"
    APPROVAL = "approval"
    OPERATOR = "operator"


class History(models.Model):
    """Append-only log of everything that happened. Its ids order what the dashboard shows live."""

    id = models.BigAutoField(primary_key=True)
    # Written under the lease guard or by services holding the instance's row (HOT_PATH_REFERENCES);
    # indexed by history_instance.
    instance = models.ForeignKey(
        Instance, null=True, blank=True, on_delete=models.CASCADE, related_name="history",
        db_index=False, db_constraint=False,
    )
    workflow = models.CharField(max_length=200, blank=True, default="")
    tenant = models.CharField(max_length=100, blank=True, default="")
    kind = models.CharField(max_length=40, choices=HistoryKind.choices)
    step_name = models.CharField(max_length=300, blank=True, default="")
    status = models.CharField(max_length=20, blank=True, default="")
    data = models.JSONField(default=dict)
    actor = models.CharField(max_length=150, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["instance", "id"], name="history_instance"),
            models.Index(fields=["tenant", "id"], name="history_tenant"),
            models.Index(fields=["created_at"], name="history_time"),
        ]


class InstanceSearch(models.Model):
    """An instance's params as text, for the instance list's "text in params" filter.

    Written only by database triggers (migration 0006): on an instance's insert, and on an
    update that sets `params`. Its trigram index (PostgreSQL) lives here, not on
    `engine_instance`, because every claim and every completion updates the instance row
    outside HOT (status and lease columns are indexed), and each such update re-indexed every
    trigram of the params there: 0.9 ms of PostgreSQL per update on the pipeline benchmark.
    Params never change after the insert, so this row is written once.
    """

    instance = models.OneToOneField(Instance, primary_key=True, on_delete=models.CASCADE, related_name="search",
                                    db_constraint=False)
    text = models.TextField()

    class Meta:
        db_table = "engine_instance_search"


class PendingEvent(models.Model):
    """An event sent to an instance, buffered per type until a `wait_for_event` takes it (FIFO)."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="events")
    type = models.CharField(max_length=200)
    payload = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    consumed_at = models.DateTimeField(null=True, blank=True)
    consumed_by = models.ForeignKey(
        Step, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    sender = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["instance", "type", "id"], name="event_fifo")]


class DeadLetterState(models.TextChoices):
    OPEN = "open"
    REDRIVEN = "redriven"
    DISCARDED = "discarded"


class DeadLetter(models.Model):
    """One per instance that errored, grouped on the dashboard by `signature`."""

    instance = models.OneToOneField(Instance, on_delete=models.CASCADE, related_name="dead_letter")
    workflow = models.CharField(max_length=200)
    tenant = models.CharField(max_length=100)
    step_name = models.CharField(max_length=300, blank=True, default="")
    error_name = models.CharField(max_length=200)
    error_message = models.TextField()
    error_traceback = models.TextField(blank=True, default="")
    signature = models.CharField(max_length=64)
    normalized_message = models.TextField()
    state = models.CharField(max_length=12, choices=DeadLetterState.choices, default=DeadLetterState.OPEN)
    created_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=150, blank=True, default="")
    resolution = models.TextField(blank=True, default="")

    class Meta:
        indexes = [
            models.Index(fields=["state", "signature"], name="deadletter_group"),
            models.Index(fields=["state", "-created_at"], name="deadletter_recent"),
        ]


# ---- costs and budgets -------------------------------------------------------------------


class ApiCost(models.Model):
    """`api_costs` as seed 004, plus tenant, attempt and provider usage. Money is Decimal."""

    service = models.CharField(max_length=100)
    cost = models.DecimalField(max_digits=14, decimal_places=6)
    instance = models.ForeignKey(  # indexed by cost_instance (below); Django's own two were copies
        Instance, null=True, blank=True, on_delete=models.SET_NULL, related_name="costs", db_index=False
    )
    workflow_type = models.CharField(max_length=200, blank=True, default="")
    step_name = models.CharField(max_length=300, blank=True, default="")
    attempt = models.IntegerField(default=1)
    success = models.BooleanField(default=True)
    model = models.CharField(max_length=200, blank=True, default="")
    tokens_in = models.IntegerField(default=0)
    tokens_cached = models.IntegerField(default=0)
    tokens_out = models.IntegerField(default=0)
    items = models.IntegerField(default=0)
    metadata = models.JSONField(default=dict)
    tenant = models.CharField(max_length=100, default="default")
    created_at = models.DateTimeField()

    class Meta:
        db_table = "api_costs"
        indexes = [
            models.Index(fields=["created_at"], name="cost_time"),
            models.Index(fields=["tenant", "created_at"], name="cost_tenant"),
            models.Index(fields=["service", "created_at"], name="cost_service"),
            models.Index(fields=["instance"], name="cost_instance"),
        ]


class BudgetScope(models.TextChoices):
    TENANT = "tenant"
    WORKFLOW = "workflow"
    SERVICE = "service"
    INSTANCE = "instance"


class BudgetPeriod(models.TextChoices):
    HOUR = "hour"
    DAY = "day"
    MONTH = "month"


class BreachPolicy(models.TextChoices):
    FAIL = "fail"  # the step fails as non-retryable
    APPROVAL = "approval"  # the instance pauses with an approval request


class Budget(models.Model):
    """A spending limit for one scope (a tenant, workflow, service or instance) per period."""

    scope = models.CharField(max_length=12, choices=BudgetScope.choices)
    key = models.CharField(max_length=200)  # the tenant, workflow, service or instance id
    period = models.CharField(max_length=8, choices=BudgetPeriod.choices)
    limit = models.DecimalField(max_digits=14, decimal_places=6)
    spent = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal("0"))
    reserved = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal("0"))
    period_start = models.DateTimeField()
    policy = models.CharField(max_length=10, choices=BreachPolicy.choices, default=BreachPolicy.FAIL)
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "key", "period"], name="budget_scope_period"),
        ]

    def __str__(self) -> str:
        return f"{self.scope}:{self.key} {self.limit}/{self.period}"


class ReservationState(models.TextChoices):
    HELD = "held"
    SETTLED = "settled"
    RELEASED = "released"


class BudgetReservation(models.Model):
    """Money set aside before a step spends it; settled with the real cost afterwards."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="reservations")
    instance = models.ForeignKey(Instance, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    step_name = models.CharField(max_length=300, blank=True, default="")
    attempt = models.IntegerField(default=1)
    service = models.CharField(max_length=100, blank=True, default="")
    amount = models.DecimalField(max_digits=14, decimal_places=6)
    actual = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    state = models.CharField(max_length=10, choices=ReservationState.choices, default=ReservationState.HELD)
    created_at = models.DateTimeField()
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["state", "budget"], name="reservation_state")]


class BudgetGrant(models.Model):
    """A one-time raise of a budget's limit granted by an operator for one instance."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="grants")
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="+")
    amount = models.DecimalField(max_digits=14, decimal_places=6)
    used = models.BooleanField(default=False)
    granted_by = models.CharField(max_length=150)
    created_at = models.DateTimeField()


class ApprovalKind(models.TextChoices):
    HUMAN = "human"  # a workflow's wait_for_approval step
    BUDGET = "budget"  # a budget breach with the approval policy


class ApprovalState(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"


class ApprovalRequest(models.Model):
    """A human-in-the-loop request; answering it sends the event its instance waits for."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="approvals")
    tenant = models.CharField(max_length=100)
    workflow = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=ApprovalKind.choices)
    step_name = models.CharField(max_length=300, blank=True, default="")
    event_type = models.CharField(max_length=200, blank=True, default="")
    title = models.CharField(max_length=300)
    description = models.TextField(blank=True, default="")
    fields = models.JSONField(default=list)  # [{"name", "label", "type", "required", "default", "choices"}]
    context = models.JSONField(default=dict)
    state = models.CharField(max_length=10, choices=ApprovalState.choices, default=ApprovalState.PENDING)
    due_at = models.DateTimeField(null=True, blank=True)
    escalation = models.CharField(max_length=300, blank=True, default="")
    budget = models.ForeignKey(Budget, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    requested_amount = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    answer = models.JSONField(null=True, blank=True)
    answered_by = models.CharField(max_length=150, blank=True, default="")
    answered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["state", "tenant", "due_at"], name="approval_inbox")]
