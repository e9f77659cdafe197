"""A turn's replay state and the checks made before each step call: `ReplayState`, the base of
`Execution` (execution.py).

It holds what the ledger already says (the steps by name and occurrence, by position), gives
each step call its occurrence and position and checks them against that history, caps the
steps an instance may take, and answers the boundaries every step passes: an operator's
terminate or pause, the worker's drain, the workflow's timeout. A replay that contradicts the
history fails with `replay_mismatch`'s error, which names both workflow versions.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings

from ingest.engine import clock, flow
from ingest.engine.errors import (
    InvalidStepConfig,
    NonDeterministicReplay,
    StepLimitExceeded,
    VersionMismatch,
    WorkflowTimeout,
)
from ingest.engine.models import Control, Instance, Status, StepKind
from ingest.engine.runtime.outcomes import FailInstance, Suspend, Unwind
from ingest.engine.runtime.policy import check_step_name
from ingest.engine.runtime.records import StepRecord, step_label
from ingest.engine.runtime.store import InstanceStore
from ingest.engine.testing_hooks import Overrides, overrides_for
from ingest.engine.workflow import get_workflow

DEFAULT_MAX_STEPS = 10_000  # RUNLEDGER_MAX_STEPS when the settings do not say


class ReplayState:
    """What one turn of one instance replays against, and the checks at each step boundary;
    `Execution` adds the life of one `step.do`."""

    def __init__(
        self,
        *,
        instance: Instance,
        store: InstanceStore,
        draining: threading.Event,
        has_steps: bool = True,
        ending: Callable[[], None] | None = None,
    ) -> None:
        self.instance = instance
        self.store = store
        self.draining = draining
        # Called once the turn has nothing left to run but its last write: the worker claims
        # the instance that takes this slot while that write commits.
        self.ending = ending or _nothing
        self.overrides: Overrides | None = overrides_for(instance.id, instance.workflow)
        records = store.load_steps() if has_steps else []
        self.by_key = {(r.name, r.seq): r for r in records if r.kind != StepKind.ROLLBACK}
        self.by_pos = {r.position: r for r in records if r.kind != StepKind.ROLLBACK}
        self.rollback_done = {r.name for r in records if r.kind == StepKind.ROLLBACK}
        self._counts: dict[str, int] = defaultdict(int)
        self._position = 0
        # Every step call counts (do, sleep, wait, child): a runaway loop stops here.
        self.max_steps = int(getattr(settings, "RUNLEDGER_MAX_STEPS", DEFAULT_MAX_STEPS))
        self._lock = threading.Lock()
        self.rollbacks: list[tuple[int, str, Callable[..., Any], Any]] = []
        self.failed_step = ""
        self.deadline: datetime | None = None  # the workflow-level timeout, set by run_turn

    # ---- identity and replay checks ----------------------------------------------------

    def now(self) -> datetime:
        return clock.now()

    def reserve(self, name: str, kind: str) -> tuple[int, int, StepRecord | None]:
        """Give this call its occurrence and position, and find its record, checking replay order."""
        check_step_name(name)
        with self._lock:
            self._counts[name] += 1
            seq, position = self._counts[name], self._position
            self._position += 1
        if position >= self.max_steps:
            raise FailInstance(
                StepLimitExceeded(
                    f"instance {self.instance.id} asked for step {step_label(name, seq)!r} past its cap of "
                    f"{self.max_steps:,} steps (RUNLEDGER_MAX_STEPS); split the work into child workflows, "
                    "or raise RUNLEDGER_MAX_STEPS if the workflow really needs more"
                ),
                step=step_label(name, seq),
            )
        rec = self.by_key.get((name, seq))
        at_position = self.by_pos.get(position)
        if at_position is not None and (at_position.name, at_position.seq) != (name, seq):
            label = step_label(name, seq)
            raise FailInstance(
                self.replay_mismatch(
                    f"instance {self.instance.id}: replay asked for step {label!r} at position "
                    f"{position}, but the history has step {step_label(at_position.name, at_position.seq)!r} there"
                ),
                step=label,
            )
        if rec is not None and (rec.position != position or rec.kind != kind):
            label = step_label(name, seq)
            raise FailInstance(
                self.replay_mismatch(
                    f"instance {self.instance.id}: replay asked for {kind} step {label!r} at position "
                    f"{position}, but the history recorded it as a {rec.kind} step at position {rec.position}"
                ),
                step=label,
            )
        return seq, position, rec

    def replay_mismatch(self, what: str) -> NonDeterministicReplay:
        """The error for a replay that contradicts the history, naming both versions: the one the
        instance started on and the one this code is. Only built on that path: a replay that
        matches pays nothing for versions."""
        return replay_mismatch(
            what,
            workflow=self.instance.workflow,
            started_on=self.instance.workflow_version,
            code_version=get_workflow(self.instance.workflow).version,
        )

    def version_at_least(self, version: int) -> bool:
        """True when the instance started on `version` of its workflow or later (step.version_at_least)."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise InvalidStepConfig(
                f"step.version_at_least takes a whole version number of at least 1; got {version!r}"
            )
        code = get_workflow(self.instance.workflow).version
        if version > code:
            raise InvalidStepConfig(
                f"workflow {self.instance.workflow!r} guards a path with step.version_at_least({version}), but its "
                f"`version` is {code}; set `version = {version}` on the class so new instances take that path"
            )
        return self.instance.workflow_version >= version

    def checkpoint(self) -> None:
        """Before new work: honour an operator's terminate or pause, the worker's drain, the timeout."""
        self.check_deadline()
        control = self.store.control
        if control in (Control.TERMINATE, Control.TERMINATE_ROLLBACK):
            raise Unwind(rollback=control == Control.TERMINATE_ROLLBACK)
        if control == Control.PAUSE:
            raise Suspend(self.now(), status=Status.RUNNING, pause=True)
        if self.draining.is_set():
            raise Suspend(self.now(), status=Status.RUNNING)

    # ---- the turn ----------------------------------------------------------------------

    def check_deadline(self) -> None:
        """Past the workflow's timeout, the instance errors at this step boundary."""
        error = self.timed_out()
        if error is not None:
            raise FailInstance(error, step="")

    def timed_out(self) -> WorkflowTimeout | None:
        """The workflow's timeout as an error, once it has passed; None before."""
        if not flow.timed_out(deadline=self.deadline, now=self.now()):
            return None
        timeout = get_workflow(self.instance.workflow)._timeout
        assert self.deadline is not None and timeout is not None
        return WorkflowTimeout(
            workflow=self.instance.workflow,
            instance_id=self.instance.id,
            timeout=timeout.total_seconds(),
            started_at=f"{self.deadline - timeout:%Y-%m-%d %H:%M:%S} UTC",
        )


def _nothing() -> None:
    pass


def replay_mismatch(what: str, *, workflow: str, started_on: int, code_version: int) -> NonDeterministicReplay:
    """`what` went wrong, with both versions and what to do. Across versions a VersionMismatch
    (a code change without a guard); within one version a NonDeterministicReplay (code outside
    steps that is not deterministic, or a change made without bumping `version`)."""
    if started_on != code_version:
        return VersionMismatch(
            f"{what}; the instance started on version {started_on} of workflow {workflow!r} and this code is "
            f"version {code_version} — guard the changed steps with step.version_at_least({code_version}) so instances "
            f"started on version {started_on} keep their path, or restart the instance",
            workflow=workflow,
            started_on=started_on,
            code_version=code_version,
        )
    return NonDeterministicReplay(
        f"{what}; the instance started on version {started_on} of workflow {workflow!r} and this code is also "
        f"version {code_version} — code outside steps must be deterministic; if the workflow changed, set "
        f"`version = {code_version + 1}` and guard the new steps with step.version_at_least({code_version + 1})"
    )
