"""The dashboard's own tables: who may see and act on which tenant, what operators did (the
audit log), and the rollups behind the DAG and costs pages."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    """Ordered from least to most rights; `dashboard.access.ROLE_RANK` relies on that order."""

    VIEWER = "viewer", "viewer (read only)"
    OPERATOR = "operator", "operator (actions, approvals, budgets)"
    ADMIN = "admin", "admin (operator + Django admin)"


class Membership(models.Model):
    """A user's role in one tenant. A user sees only the tenants they are a member of."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.CharField(max_length=100)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], name="membership_user_tenant"),
        ]
        indexes = [models.Index(fields=["tenant"], name="membership_tenant")]

    def __str__(self) -> str:
        return f"{self.user_id}@{self.tenant} ({self.role})"


# ---- audit: one row per operator action, from any interface --------------------------------
#
# Written only by dashboard.audit (in the same transaction as the action), read by
# dashboard.selectors.audit. The engine's History keeps its per-instance operator rows; these
# add what History cannot hold: the bulk selection or filter, how many it touched, and where
# the action came from.


class AuditSource(models.TextChoices):
    WEB = "web", "dashboard"
    API = "api", "REST API"
    CLI = "cli", "command line"


class AuditEntry(models.Model):
    """One operator action: who, what, on which selection or filter, how many, when, from where."""

    created_at = models.DateTimeField()
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor = models.CharField(max_length=150)  # the username as it was when acting
    action = models.CharField(max_length=60)  # "instance.pause", "dead_letters.redrive", ...
    source = models.CharField(max_length=8, choices=AuditSource.choices)
    ip = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)
    tenants = models.JSONField(default=list)  # for display; AuditTenant rows scope reads
    selection = models.JSONField(default=dict)  # the ids, the instance or the filter acted on
    affected = models.IntegerField()
    reason = models.TextField(blank=True)

    class Meta:
        verbose_name_plural = "audit entries"
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="audit_newest"),
            models.Index(fields=["action", "-id"], name="audit_action"),
        ]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} ({self.affected}) at {self.created_at:%Y-%m-%d %H:%M:%S}"


class AuditTenant(models.Model):
    """A tenant an audit entry touched. An entry is shown to a user who reads all of its tenants:
    a bulk action over two tenants stays hidden from a member of only one."""

    entry = models.ForeignKey(AuditEntry, on_delete=models.CASCADE, related_name="tenant_rows")
    tenant = models.CharField(max_length=100)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["entry", "tenant"], name="audit_tenant_unique")]
        indexes = [models.Index(fields=["tenant", "entry"], name="audit_tenant_entry")]


# ---- submissions: each acting form's one-time token, once used -----------------------------
#
# Written and read only by dashboard.submissions: a form that acts carries a token; the first
# submit that uses it stores what it did (where it sent the user, what it told them), and the
# same token sent again shows that instead of acting a second time.


class FormSubmission(models.Model):
    """One acting form submitted: whose token, to which page, when, and the answer it got."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=64)  # the token's SHA-256: the token itself is not kept
    path = models.CharField(max_length=500)
    created_at = models.DateTimeField()
    location = models.CharField(max_length=2000, blank=True)  # where the first answer sent the user
    notes = models.JSONField(default=list)  # the messages it showed: [[level, text], ...]

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="form_submission_once")]
        indexes = [models.Index(fields=["created_at"], name="form_submission_age")]


# ---- saved views of the instances list ------------------------------------------------------
#
# Written and read only by dashboard.saved_views: each user's own, never shown to another user.


class SavedView(models.Model):
    """A user's named filters of the instances list: the list's query string, as the list writes
    it (its filters and sort, no page position), opened as /instances/?<query>."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=80)
    query = models.CharField(max_length=2000, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()  # the version a rename or delete form carries

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="saved_view_name")]

    def __str__(self) -> str:
        return self.name


# ---- rollups: pre-aggregated ledger figures for the DAG and costs pages ----------------------
#
# Written only by dashboard.rollups.services (the roller), read by dashboard.rollups.reads, which
# serves exact figures by reading these for settled hours and the ledger itself for the rest.
# dashboard/rollups/__init__.py explains the scheme.


class _StepFigures(models.Model):
    """What the step rollups count per workflow, tenant and step name (per hour or per day)."""

    workflow = models.CharField(max_length=200)
    tenant = models.CharField(max_length=100)
    step_name = models.CharField(max_length=300)
    n = models.IntegerField(default=0)
    in_flight = models.IntegerField(default=0)
    completed = models.IntegerField(default=0)
    errored = models.IntegerField(default=0)
    retried = models.IntegerField(default=0)
    attempts = models.BigIntegerField(default=0)
    # Durations of the completed steps: a packed histogram (dashboard.rollups.hist).
    durations = models.JSONField(default=list)

    class Meta:
        abstract = True


class StepHourly(_StepFigures):
    """Steps by the hour they started (UTC), workflow, tenant and step name: the DAG heat."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["hour", "workflow", "tenant", "step_name"], name="step_hourly_key"),
        ]
        indexes = [models.Index(fields=["workflow", "hour"], name="step_hourly_workflow")]


class StepDaily(_StepFigures):
    """StepHourly summed per local day (settings.TIME_ZONE): the hours that start on that day."""

    day = models.DateField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["day", "workflow", "tenant", "step_name"], name="step_daily_key"),
        ]
        indexes = [models.Index(fields=["workflow", "day"], name="step_daily_workflow")]


class _CostMeasures(models.Model):
    """The sums every cost rollup keeps of the api_costs rows it covers."""

    total = models.DecimalField(max_digits=20, decimal_places=6)
    calls = models.BigIntegerField()
    failed = models.BigIntegerField()
    tokens_in = models.BigIntegerField()
    tokens_out = models.BigIntegerField()

    class Meta:
        abstract = True


class _CostFigures(_CostMeasures):
    """Every dimension the costs page filters or groups on, with the sums (per hour or per day)."""

    tenant = models.CharField(max_length=100)
    service = models.CharField(max_length=100)
    workflow_type = models.CharField(max_length=200)
    step_name = models.CharField(max_length=300)
    model = models.CharField(max_length=200)

    class Meta:
        abstract = True


class CostHourly(_CostFigures):
    """api_costs summed by the hour they were recorded (UTC) and every dimension the costs page
    filters or groups on."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "tenant", "service", "workflow_type", "step_name", "model"], name="cost_hourly_key"
            ),
        ]
        indexes = [models.Index(fields=["tenant", "hour"], name="cost_hourly_tenant")]


class CostDaily(_CostFigures):
    """CostHourly summed per local day (settings.TIME_ZONE): the hours that start on that day."""

    day = models.DateField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "tenant", "service", "workflow_type", "step_name", "model"], name="cost_daily_key"
            ),
        ]
        indexes = [models.Index(fields=["tenant", "day"], name="cost_daily_tenant")]


class _InstanceSpend(_CostMeasures):
    """api_costs summed per instance over its whole life, with the span of those rows."""

    instance_id = models.CharField(max_length=100)
    tenant = models.CharField(max_length=100)
    workflow_type = models.CharField(max_length=200)
    first_at = models.DateTimeField()
    last_at = models.DateTimeField()

    class Meta:
        abstract = True


class InstanceCost(_InstanceSpend):
    """api_costs summed per instance over its whole life, with the span of its rows: the costs
    page's per-instance table reads these for instances whose spend lies wholly in the window."""

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["instance_id", "tenant", "workflow_type"], name="instance_cost_key"),
        ]
        indexes = [
            models.Index(fields=["first_at"], name="instance_cost_first"),
            models.Index(fields=["-total", "instance_id"], name="instance_cost_total"),
            models.Index(fields=["-calls", "-last_at", "instance_id"], name="instance_cost_calls_last"),
            models.Index(fields=["-last_at"], name="instance_cost_last"),
        ]


class _InstancePartCost(_InstanceSpend):
    """api_costs summed per instance and one value of a dimension (a service, a step, a model)
    over the instance's whole life, with the span of those rows: the per-instance table filtered by
    that dimension reads these (as `InstanceCost` serves it unfiltered) for the instances whose
    whole spend lies inside the window. Rows whose value is empty are not kept (an empty value
    filters nothing)."""

    # Named here so code that picks one of the three tables at run time can query it (the type
    # checker gives an abstract model no manager of its own); each table inherits it.
    objects = models.Manager()

    class Meta:
        abstract = True


def _part_key(column: str, short: str) -> list[models.BaseConstraint]:
    """One row per instance and value of `column`."""
    return [
        models.UniqueConstraint(
            fields=["instance_id", "tenant", "workflow_type", column], name=f"instance_{short}_cost_key"
        )
    ]


def _part_indexes(column: str, short: str) -> list[models.Index]:
    """The per-instance table's sorts (spend, calls, latest, first) under a filter on `column`."""
    return [
        models.Index(fields=[column, "-total", "instance_id"], name=f"inst_{short}_cost_total"),
        models.Index(fields=[column, "-calls", "-last_at", "instance_id"], name=f"inst_{short}_calls_last"),
        models.Index(fields=[column, "-last_at"], name=f"inst_{short}_cost_last"),
        models.Index(fields=[column, "first_at"], name=f"inst_{short}_cost_first"),
    ]


class InstanceServiceCost(_InstancePartCost):
    service = models.CharField(max_length=100)

    class Meta:
        constraints = _part_key("service", "service")
        indexes = _part_indexes("service", "service")


class InstanceStepCost(_InstancePartCost):
    step_name = models.CharField(max_length=300)

    class Meta:
        constraints = _part_key("step_name", "step")
        indexes = _part_indexes("step_name", "step")


class InstanceModelCost(_InstancePartCost):
    model = models.CharField(max_length=200)

    class Meta:
        constraints = _part_key("model", "model")
        indexes = _part_indexes("model", "model")


# The per-instance rollups split by one api_costs column, by that column.
INSTANCE_PART_COSTS: dict[str, type[_InstancePartCost]] = {
    "service": InstanceServiceCost,
    "step_name": InstanceStepCost,
    "model": InstanceModelCost,
}


# ---- instance counts: the overview's tiles, throughput and steps in flight -------------------
#
# Written by dashboard.rollups.instance_counts (the roller), read by dashboard.rollups.instance_reads,
# which applies the instances changed since the roller's cursor to them (exact and current).


class InstanceState(models.Model):
    """Each instance as the roller last saw it (as of its cursor): the columns the counts group
    by, and how many of its steps were running. The roller's own copy, indexed on created and ended
    time (the engine indexes no ended time: its hot path writes few indexes): it says which hours an
    instance counted in before it changed, and answers the window's partial edge hour."""

    instance_id = models.CharField(max_length=100, primary_key=True)
    tenant = models.CharField(max_length=100)
    workflow = models.CharField(max_length=200)
    status = models.CharField(max_length=24)
    created_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    running_steps = models.IntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(fields=["created_at"], name="instance_state_created"),
            models.Index(fields=["ended_at"], name="instance_state_ended", condition=models.Q(ended_at__isnull=False)),
            models.Index(fields=["workflow", "ended_at"], name="instance_state_wf_ended"),
        ]


class _InstanceCounts(models.Model):
    tenant = models.CharField(max_length=100)
    workflow = models.CharField(max_length=200)
    status = models.CharField(max_length=24)
    n = models.IntegerField(default=0)
    running_steps = models.IntegerField(default=0)  # of these instances' steps, how many run

    class Meta:
        abstract = True


class InstanceHourly(_InstanceCounts):
    """Instances by the UTC hour they were created, tenant, workflow and status (now)."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["hour", "tenant", "workflow", "status"], name="instance_hourly_key")
        ]


class InstanceDaily(_InstanceCounts):
    """InstanceHourly summed per local day (days.py), like StepDaily and CostDaily."""

    day = models.DateField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["day", "tenant", "workflow", "status"], name="instance_daily_key")
        ]
        indexes = [models.Index(fields=["status", "tenant"], name="instance_daily_status")]


class InstanceEndedHourly(models.Model):
    """Finished instances by the UTC hour they ended, tenant, workflow and status: throughput."""

    hour = models.DateTimeField()
    tenant = models.CharField(max_length=100)
    workflow = models.CharField(max_length=200)
    status = models.CharField(max_length=24)
    n = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["hour", "tenant", "workflow", "status"], name="instance_ended_hourly_key")
        ]


class RollupState(models.Model):
    """Where the roller stands (one row). Every rollup row reflects the ledger as of `cursor`:
    the history rows up to it (but the `gaps`) have been folded in, and every hour before
    `closed_until` has been computed."""

    name = models.CharField(max_length=20, primary_key=True)
    cursor = models.BigIntegerField(default=0)
    # History ids below `cursor` not yet seen (a transaction that took its id earlier may still
    # commit): id -> the ledger's newest transaction id when the hole was first seen.
    gaps = models.JSONField(default=dict)
    closed_until = models.DateTimeField(null=True, blank=True)
    instances_built = models.BooleanField(default=False)
    # The time zone the daily rows' days are in; when settings.TIME_ZONE differs they are unused
    # until the roller has computed them again.
    day_zone = models.CharField(max_length=64, blank=True, default="")
    # InstanceState and the instance counts have been built from the ledger (then kept by the
    # history); RetentionBatch ids up to `retention_seen` have been applied to them.
    instance_counts_built = models.BooleanField(default=False)
    retention_seen = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(null=True, blank=True)


class StepHourIds(models.Model):
    """For each UTC hour, the lowest and highest id of the steps that started in it.

    The engine keeps no index on steps' start time (its hot path writes fewer indexes), but step
    ids grow with insertion and a step is inserted when it starts or soon after. So the steps of
    an hour lie in this id range of the primary key, and a few hours of steps are found without
    scanning the table. Widened by the roller for every step it sees (dashboard/rollups/dirty.py
    says how it sees them all); a step inserted long after it started widens its hour's range."""

    hour = models.DateTimeField(primary_key=True)
    min_id = models.BigIntegerField()
    max_id = models.BigIntegerField()
