"""`connections-reconcile`: start what a lost webhook did not, from a pull of what changed.

    list-connections   the tenant's enabled Gong and Salesforce connections
    pull-gong          calls started in the window (`GET /v2/calls` by start time); each call
                       without its `gong-{tenant}-{call}` instance is started with its
                       transcript and speakers, fetched 50 calls a request
    pull-salesforce    opportunities whose SystemModstamp is in the window (SOQL), each started
                       as an Outbound Message of the same change is (versioned by LastModifiedDate)

The ids are the webhooks' own (`gong_ingest_start`, `salesforce_ingest_start`), so a call or a
change a webhook already started is "already processed", never started twice. Each pull holds
its connection's cursor and moves it only over a window it started completely
(`ingest.pipelines.cursors`); a failed pull keeps the cursor and shows its error, and the
instance ends `completed_with_errors`. One schedule per tenant (`reconcile-<tenant>`, made by
`reconcile_schedules_ensure`) fires it every `RUNLEDGER_RECONCILE_MINUTES`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice
from typing import TYPE_CHECKING, Any

from django.conf import settings

from ingest.engine import Workflow, WorkflowEvent, WorkflowResult, redact
from ingest.engine import now as engine_now
from ingest.engine.models import Instance
from ingest.pipelines.cursors import (
    LOOKBACK_OPTION,
    Window,
    cursor_advance,
    cursor_claim,
    cursor_fail,
    lookback_minutes_check,
    pull_window,
)
from ingest.pipelines.models import ConnectionKind
from ingest.pipelines.selectors import PulledConnection, pulled_connections
from ingest.sources.gong import GongCall, GongClient
from ingest.sources.salesforce import OPPORTUNITY_FIELDS, changed_soql
from ingest.triggers.models import Schedule
from ingest.triggers.services import schedule_create, schedule_update
from ingest.workflows.common import QUICK_RETRIES, id_part
from ingest.workflows.gong import (
    Started,
    gong_client,
    gong_ingest_start,
    gong_instance_id,
    transcript_text,
)
from ingest.workflows.salesforce import salesforce_client, salesforce_ingest_start
from ingest.workflows.sharing import FAIR_KEY, LIVE_PRIORITY

if TYPE_CHECKING:
    from ingest.engine import StepApi

log = logging.getLogger("runledger.ingest")
WORKFLOW = "connections-reconcile"
ACTOR = "reconcile"
TRANSCRIPT_BATCH = 50
HOLD = timedelta(minutes=15)  # the pull step's timeout: a pull whose worker died frees its connection then
MAX_WINDOW = timedelta(days=1)  # a cursor days behind catches up a day a pull
PULL_INLINE_WAIT = 30.0  # a pull sleeps for its rate limit's next slot; an ingest step hands it back


@dataclass(frozen=True)
class Pulled:
    listed: int
    started: int


def _chunks(items: Iterable[GongCall], size: int) -> Iterator[list[GongCall]]:
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch


def gong_calls_start(
    client: GongClient, tenant: str, calls: Sequence[GongCall], *, actor: str, priority: int = LIVE_PRIORITY
) -> list[Started]:
    """Start `gong-ingest` for each call without its instance, transcripts and speakers fetched
    in batches (two requests per 50 calls, not two per instance); the others are reported as
    already processed without a request."""
    ids = {call.id: gong_instance_id(tenant, call.id) for call in calls}
    have: set[str] = set()
    for batch in _chunks(calls, 500):
        have |= set(Instance.objects.filter(id__in=[ids[c.id] for c in batch]).values_list("id", flat=True))
    results = [Started(ids[c.id], False) for c in calls if ids[c.id] in have]
    missing = list({c.id: c for c in calls if ids[c.id] not in have}.values())
    for batch in _chunks(missing, TRANSCRIPT_BATCH):
        chosen = [c.id for c in batch]
        parties = {e.call.id: e.parties for e in client.iter_extensive(chosen)}
        texts = {t.call_id: transcript_text(t, parties.get(t.call_id, ())) for t in client.iter_transcripts(chosen)}
        results += [
            gong_ingest_start(tenant, call, transcript=texts.get(call.id), actor=actor, priority=priority)
            for call in batch
        ]
    return results


def gong_pull(*, tenant: str, window: Window) -> Pulled:
    client = gong_client(tenant, max_inline_wait=PULL_INLINE_WAIT)
    calls = list(client.iter_calls(from_time=window.start, to_time=window.end))
    started = gong_calls_start(client, tenant, calls, actor=ACTOR)
    return Pulled(listed=len(calls), started=sum(s.created for s in started))


def salesforce_pull(*, tenant: str, window: Window) -> Pulled:
    soql = changed_soql("Opportunity", OPPORTUNITY_FIELDS, start=window.start, end=window.end)
    listed = started = 0
    for record in salesforce_client(tenant).query(soql):
        listed += 1
        started += salesforce_ingest_start(
            tenant, object_id=str(record["Id"]), record=record, trigger="reconcile", actor=ACTOR
        ).created
    return Pulled(listed=listed, started=started)


PULLS: dict[str, Callable[..., Pulled]] = {ConnectionKind.GONG: gong_pull, ConnectionKind.SALESFORCE: salesforce_pull}


def lookback(found: PulledConnection) -> timedelta:
    """The connection's `reconcile_lookback_minutes` option, else the setting of its kind."""
    default = (
        settings.RUNLEDGER_RECONCILE_GONG_LOOKBACK_MINUTES
        if found.kind == ConnectionKind.GONG
        else settings.RUNLEDGER_RECONCILE_SALESFORCE_LOOKBACK_MINUTES
    )
    minutes = lookback_minutes_check(
        found.options.get(LOOKBACK_OPTION, default),
        what=f"{LOOKBACK_OPTION} of the {found.kind} connection of tenant {found.tenant}",
    )
    return timedelta(minutes=minutes)


def _to_the_second(value: datetime) -> datetime:
    return value.replace(microsecond=0)  # SOQL's dateTime literals have no fractions


def connection_pull(*, tenant: str, kind: str, holder: str, now: datetime | None = None) -> dict[str, Any]:
    """One pull of the tenant's `kind` connection: what it listed and started, or why not."""
    found = next((c for c in pulled_connections(tenant=tenant) if c.kind == kind), None)
    if found is None:  # disabled, deleted, or turned off for pulls since the run began
        return {"skipped": f"no {kind} connection of tenant {tenant} is pulled"}
    now = _to_the_second(now or engine_now())
    claimed = cursor_claim(connection_id=found.id, holder=holder, now=now, hold=HOLD)
    if claimed is None:
        return {"skipped": f"another pull of the {kind} connection runs now"}
    try:
        window = pull_window(cursor=claimed.cursor, now=now, lookback=lookback(found), max_window=MAX_WINDOW)
        pulled = PULLS[kind](tenant=tenant, window=window)
    except Exception as error:
        # What the pull started stays started; the cursor stays, so the next pull reads it all again.
        message = redact(f"{type(error).__name__}: {error}")
        log.warning("the %s pull of tenant %s failed: %s", kind, tenant, message)
        cursor_fail(connection_id=found.id, holder=holder, error=message, now=engine_now())
        return {"error": message}
    cursor_advance(
        connection_id=found.id,
        holder=holder,
        window=window,
        listed=pulled.listed,
        started=pulled.started,
        now=engine_now(),
    )
    return {
        "listed": pulled.listed,
        "started": pulled.started,
        "window": [window.start.isoformat(), window.end.isoformat()],
    }


class ConnectionsReconcile(Workflow):
    name = WORKFLOW
    concurrency_key = FAIR_KEY  # one tenant's slow provider does not hold up another's pulls
    retention_days = 7  # one run per tenant every few minutes: the cursors are what lasts

    def run(self, event: WorkflowEvent, step: StepApi) -> WorkflowResult:
        tenant = event.tenant
        kinds = step.do(
            "list-connections", lambda ctx: [c.kind for c in pulled_connections(tenant=tenant)], retries=QUICK_RETRIES
        )
        metrics: dict[str, int] = {}
        errors: list[str] = []
        for kind in kinds:
            outcome = step.do(
                f"pull-{kind}",
                lambda ctx, kind=kind: connection_pull(tenant=tenant, kind=kind, holder=ctx.instance_id),
                retries=QUICK_RETRIES,
                timeout=HOLD,
            )
            if "error" in outcome:
                errors.append(f"{kind}: {outcome['error']}")
            metrics[f"{kind}_listed"] = int(outcome.get("listed", 0))
            metrics[f"{kind}_started"] = int(outcome.get("started", 0))
        return WorkflowResult(success=not errors, metrics=metrics, errors=errors)


# ---- its schedules --------------------------------------------------------------------------


def reconcile_schedule_name(tenant: str) -> str:
    """`reconcile-<tenant>`, within a schedule name's 60 characters."""
    name = f"reconcile-{id_part(tenant)}"
    return name if len(name) <= 60 else f"{name[:51]}-{hashlib.sha256(tenant.encode()).hexdigest()[:8]}"


def reconcile_cron(minutes: int) -> str:
    """Every `minutes` (a divisor of an hour) as a cron expression."""
    return {1: "* * * * *", 60: "0 * * * *"}.get(minutes, f"*/{minutes} * * * *")


def reconcile_schedules_ensure(now: datetime) -> list[str]:
    """Every tenant with a Gong or Salesforce connection has its `reconcile-<tenant>` schedule,
    firing every `RUNLEDGER_RECONCILE_MINUTES`: made when missing, its cron set again when the
    setting changed. An operator's disable is kept. The names made or changed.

    The scheduler's leader calls it (`Scheduler.upkeep`, registered by the ingest app), so a
    connection added anywhere is pulled within minutes and the setting is the interval."""
    cron = reconcile_cron(int(settings.RUNLEDGER_RECONCILE_MINUTES))
    tenants = sorted({c.tenant for c in pulled_connections()})
    names = {reconcile_schedule_name(t): t for t in tenants}
    existing = {s.name: s for s in Schedule.objects.filter(name__in=list(names))}
    changed = []
    for name, tenant in names.items():
        schedule = existing.get(name)
        if schedule is None:
            schedule_create(name=name, workflow=WORKFLOW, cron_expression=cron, tenant=tenant, now=now)
        elif schedule.workflow != WORKFLOW or schedule.tenant != tenant:
            log.warning(
                "schedule %s starts %s for tenant %s, not %s for %s; leaving it as it is",
                name,
                schedule.workflow,
                schedule.tenant,
                WORKFLOW,
                tenant,
            )
            continue
        elif schedule.cron != cron:
            schedule_update(name=name, cron_expression=cron, now=now)
        else:
            continue
        changed.append(name)
    return changed
