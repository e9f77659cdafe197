"""Which way a hot write goes: through the process's group commit (commits.py), or alone on this
thread's connection (the sql/ statements). The choice is made here, above the statements, so
the statements call nothing above them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

from django.db import connection

from ingest.engine.sql import instances as sql_instances
from ingest.engine.sql import steps as sql_steps
from ingest.engine.sql.instances import InstanceDone
from ingest.engine.sql.steps import Completion
from ingest.engine.writes import commits, notify

P = ParamSpec("P")
R = TypeVar("R")
_group_commit: bool | None = None  # RUNLEDGER_GROUP_COMMIT, read once (asked at every step)


def grouped() -> bool:
    """Whether a completion may go through the process's group commit: on, and this thread has
    no transaction open (a step called inside the workflow's own atomic block commits with it)."""
    global _group_commit
    if _group_commit is None:
        from django.conf import settings

        _group_commit = bool(settings.RUNLEDGER_GROUP_COMMIT)
    return _group_commit and not connection.in_atomic_block


def _params_of(source: Callable[P, object]) -> Callable[[Callable[..., R]], Callable[P, R]]:
    """Type the decorated function as taking `source`'s parameters (it passes them on as they are)."""

    def typed(function: Callable[..., R]) -> Callable[P, R]:
        return function

    return typed


# Both take a completion's fields as sql/steps.py's statement does, so the two ways of writing it
# (grouped, or alone) are called alike and the parameters are spelled out once, on the statement.
@_params_of(sql_steps.step_finish)
def step_finish(**completion: Any) -> tuple[str, int] | None:
    """Store a step's successful attempt durably (sql/steps.py's statement), through the express
    group commit when completions are grouped here, and announce its history rows (at once when
    the group commit has committed them, else after this thread's transaction commits). Returns
    (control, step id), or None when the lease is lost."""
    if grouped():
        # Looked up at each call, not bound at import: a test may swap in a fresh group commit.
        got = commits.express.finish(Completion(**completion))
        if got is not None:
            notify.request_history()  # committed: no need to ask this thread's connection
        return got
    got = sql_steps.step_finish(**completion)
    if got is not None:
        notify.history()
    return got


@_params_of(sql_steps.step_finish)
def step_finish_deferred(**completion: Any) -> commits.Pending | None:
    """Queue the same write on the group commit and return its `Pending` at once; None when
    completions are not grouped here (the caller then writes it with `step_finish`)."""
    if not grouped():
        return None
    return commits.group.submit(Completion(**completion))


def instance_complete(
    *, iid: str, token: str, now: datetime, output: str | None, woke: tuple[int, str, datetime] | None = None
) -> bool:
    """End an instance as complete with its output (sql/instances.py's statement), through the
    group commit when completions are grouped and no due sleep completes with it. False when
    the lease is lost."""
    if woke is None and grouped():
        return commits.group.complete(InstanceDone(iid=iid, token=token, now=now, output=output))
    return sql_instances.instance_complete(iid=iid, token=token, now=now, output=output, woke=woke)


def _setting_changed(*, setting: str, **_: Any) -> None:
    global _group_commit
    if setting == "RUNLEDGER_GROUP_COMMIT":
        _group_commit = None


def _listen_for_setting_changes() -> None:
    from django.core.signals import setting_changed

    setting_changed.connect(_setting_changed, dispatch_uid="runledger-sql-settings")


_listen_for_setting_changes()
