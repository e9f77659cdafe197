"""Workflow versions: retire an old version once no instance runs on it, and the check the
actions that run an instance again make (retry, restart from a step, fork).

A retired version is a promise to the developers: no instance will replay that version's path
again, so the code guarded by `step.version_at_least` for it may be deleted.
"""

from __future__ import annotations

from collections import Counter

from django.db import transaction

from ingest.engine import clock
from ingest.engine.errors import InvalidTransition, VersionInUse, VersionRetired
from ingest.engine.models import FINISHED_STATUSES, Instance, RetiredVersion
from ingest.engine.sql.versions import version_lock
from ingest.engine.workflow import get_workflow


def workflow_version_retire(*, workflow: str, version: int, actor: str = "", reason: str = "") -> RetiredVersion:
    """Retire `version` of `workflow`: refused for the code's current version and while any
    instance (in any tenant) still runs on it; instances that ended stay readable."""
    current = get_workflow(workflow).version  # UnknownWorkflow for a name no code registers
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidTransition(f"a workflow version is a whole number of at least 1; got {version!r}")
    if version >= current:
        raise VersionInUse(
            f"cannot retire version {version} of workflow {workflow!r}: the code is version {current}, and "
            "new instances start on it; only older versions can be retired"
        )
    with transaction.atomic():
        version_lock(workflow=workflow, version=version)
        if RetiredVersion.objects.filter(workflow=workflow, version=version).exists():
            raise InvalidTransition(f"version {version} of workflow {workflow!r} is already retired")
        live = Counter(
            Instance.objects.filter(workflow=workflow, workflow_version=version)
            .exclude(status__in=FINISHED_STATUSES)
            .values_list("status", flat=True)
        )
        if live:
            total = sum(live.values())
            by_status = ", ".join(f"{n} {status}" for status, n in sorted(live.items()))
            raise VersionInUse(
                f"cannot retire version {version} of workflow {workflow!r}: {total} instance"
                f"{'s' if total != 1 else ''} still run{'' if total != 1 else 's'} on it ({by_status}) — "
                "let them finish or terminate them, then retire it"
            )
        return RetiredVersion.objects.create(
            workflow=workflow, version=version, retired_at=clock.now(), retired_by=actor, reason=reason[:2000]
        )


def version_check_runnable(*, workflow: str, version: int, action: str, instance_id: str) -> None:
    """Inside the action's transaction: refuse to run an instance again on a retired version.
    Holds the version's lock until that transaction ends (sql/versions.py)."""
    version_lock(workflow=workflow, version=version)
    retired = RetiredVersion.objects.filter(workflow=workflow, version=version).first()
    if retired is not None:
        raise VersionRetired(
            f"cannot {action} instance {instance_id}: it started on version {version} of workflow {workflow!r}, "
            f"retired on {retired.retired_at:%Y-%m-%d %H:%M} UTC"
            + (f" by {retired.retired_by}" if retired.retired_by else "")
            + " — its code path may be gone; replay it instead (a new instance on the current version)"
        )
