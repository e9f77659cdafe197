"""What runs spend and may spend: API costs, budgets with their reservations and grants, approvals."""

from __future__ import annotations

from decimal import Decimal

from django.db import models

from ingest.engine.models.instances import Instance


class ApiCost(models.Model):
    """One paid call: its service, model and cost, with its tenant, attempt and provider usage. Money is Decimal."""

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
        # One open budget question per instance and budget: parallel steps that hit the same
        # budget at once wait on the one answer (a check-then-insert let two through).
        constraints = [
            models.UniqueConstraint(
                fields=["instance", "budget"],
                condition=models.Q(kind="budget", state="pending"),
                name="approval_one_pending_per_budget",
            )
        ]
