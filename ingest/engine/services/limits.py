"""The operators' concurrency limits per workflow and key value (for the shipped workflows: per
tenant): set one, remove one. The claim reads the table itself (sql/flow.py), so a change holds
from the next claim of every worker process on.

Each limit has a version (its last change, in microseconds; "0" when none is set): a caller that
passes the version it was shown is refused with ConcurrencyLimitChanged when another change came
first, so an open page cannot undo what another tab did.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from ingest.engine import clock
from ingest.engine.errors import (
    ConcurrencyLimitChanged,
    ConcurrencyLimitNotFound,
    InvalidConcurrencyLimit,
)
from ingest.engine.models import ConcurrencyLimit
from ingest.engine.workflow import Workflow, registered_workflows
from ingest.engine.writes import notify

MAX_CONCURRENT = 10_000
MAX_KEY = 200


def keyed_workflows() -> list[type[Workflow]]:
    """The registered workflows that partition by a concurrency key: the ones a limit can cap."""
    return sorted((cls for cls in registered_workflows() if cls.concurrency_key), key=lambda cls: cls.name)


def limit_version(row: ConcurrencyLimit | None) -> str:
    return "0" if row is None else str(int(row.updated_at.timestamp() * 1_000_000))


def concurrency_limit_problems(*, workflow: str, key: str, max_concurrent: object) -> dict[str, str]:
    """Every field that is wrong, by name ("workflow", "tenant", "max_concurrent"), with why."""
    problems: dict[str, str] = {}
    names = [cls.name for cls in keyed_workflows()]
    if workflow not in names:
        problems["workflow"] = (
            f"workflow {str(workflow)[:200]!r} is not a registered workflow with a "
            f"concurrency key; limits apply to {', '.join(names) or 'none'}"
        )
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY or key != key.strip():
        problems["tenant"] = (
            f"the tenant (key) must be 1–{MAX_KEY} characters without leading or "
            f"trailing spaces; got {str(key)[:220]!r}"
        )
    if (
        isinstance(max_concurrent, bool)
        or not isinstance(max_concurrent, int)
        or not 1 <= max_concurrent <= MAX_CONCURRENT
    ):
        problems["max_concurrent"] = (
            f"max_concurrent must be a whole number from 1 to {MAX_CONCURRENT}; "
            f"got {max_concurrent!r} (to stop a tenant's runs, pause them)"
        )
    return problems


def concurrency_limit_check(*, workflow: str, key: str, max_concurrent: object) -> int:
    """The cap as a number, or InvalidConcurrencyLimit naming every field that is wrong."""
    problems = concurrency_limit_problems(workflow=workflow, key=key, max_concurrent=max_concurrent)
    if problems:
        raise InvalidConcurrencyLimit("; ".join(problems.values()), problems=problems)
    assert isinstance(max_concurrent, int)
    return max_concurrent


def _check_version(row: ConcurrencyLimit | None, *, workflow: str, key: str, version: str | None) -> None:
    if version is None or limit_version(row) == version:
        return
    if row is None:
        what = "was removed"
    else:
        what = f"was set to {row.max_concurrent} by {row.updated_by or 'someone'} at {row.updated_at:%H:%M:%S} UTC"
    raise ConcurrencyLimitChanged(
        f"the concurrency limit of {workflow} for {key!r} {what} since you read it. "
        "Nothing was done; look at it as it is now and decide again."
    )


def concurrency_limit_set(
    *, workflow: str, key: str, max_concurrent: int, actor: str, version: str | None = None
) -> ConcurrencyLimit:
    """Cap `workflow`'s running instances of key value `key` at `max_concurrent` (create or change).

    `version`: the version the caller was shown ("0": none was set); refused when it moved."""
    cap = concurrency_limit_check(workflow=workflow, key=key, max_concurrent=max_concurrent)
    try:
        with transaction.atomic():
            row = ConcurrencyLimit.objects.select_for_update().filter(workflow=workflow, key=key).first()
            _check_version(row, workflow=workflow, key=key, version=version)
            now = clock.now()
            if row is None:
                row = ConcurrencyLimit.objects.create(
                    workflow=workflow, key=key, max_concurrent=cap, updated_at=now, updated_by=actor
                )
            else:
                row.max_concurrent, row.updated_at, row.updated_by = cap, now, actor
                row.save(update_fields=["max_concurrent", "updated_at", "updated_by"])
    except IntegrityError as exc:  # another writer created the same limit first
        raise ConcurrencyLimitChanged(
            f"the concurrency limit of {workflow} for {key!r} was set by someone else meanwhile. "
            "Nothing was done; look at it as it is now and decide again."
        ) from exc
    notify.ready()  # a raised cap frees slots: idle workers claim now, not at their next poll
    return row


def concurrency_limit_delete(*, workflow: str, key: str, actor: str, version: str | None = None) -> int:
    """Remove `workflow`'s limit for `key`: the workflow's own cap applies again. Returns 1."""
    with transaction.atomic():
        row = ConcurrencyLimit.objects.select_for_update().filter(workflow=workflow, key=key).first()
        if row is None:
            if version not in (None, "0"):
                _check_version(row, workflow=workflow, key=key, version=version)
            raise ConcurrencyLimitNotFound(
                f"no concurrency limit is set for {workflow[:200]!r} and {key[:200]!r}; nothing was removed"
            )
        _check_version(row, workflow=workflow, key=key, version=version)
        row.delete()
    notify.ready()
    return 1
