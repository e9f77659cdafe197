"""Engine errors. One base class; one subclass per condition, carrying the facts a reader needs."""

from __future__ import annotations


class EngineError(Exception):
    """Unexpected engine error."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__doc__)


class NonRetryableError(Exception):
    """Raised inside a step: end the step after this attempt, without retrying."""

    def __init__(self, message: str = "", name: str | None = None) -> None:
        super().__init__(message)
        self.error_name = name or type(self).__name__

    @classmethod
    def wrap(cls, error: BaseException, message: str | None = None) -> NonRetryableError:
        """`error` as a permanent failure: the step ends without retrying, and its attempts, its
        dead letter and the instance's error keep `error`'s class name, so failures group by what
        really failed (`raise NonRetryableError.wrap(error) from error`). The message is
        `error`'s own, or `message` when the caller says more (what was being done, how to fix
        it); the name stays `error`'s either way."""
        return cls(message or str(error) or type(error).__name__, name=error_name_of(error))


def error_class_name(cls: type[BaseException]) -> str:
    """How the ledger names an exception class: builtins and engine errors by their name, any
    other by its dotted path (so replay can import it again)."""
    short = cls.__module__ in ("builtins", __name__)
    return cls.__name__ if short else f"{cls.__module__}.{cls.__qualname__}"


def error_name_of(exc: BaseException) -> str:
    """The name an exception is stored under: the one it carries (`NonRetryableError(name=…)`,
    `NonRetryableError.wrap`, `StepFailed`), else its class's."""
    name = getattr(exc, "error_name", None)
    return name if isinstance(name, str) and name else error_class_name(type(exc))


class UnknownWorkflow(EngineError):
    """No workflow is registered under that name."""


class DuplicateWorkflow(EngineError):
    """Another workflow class is already registered under that name."""


class InvalidInstanceId(EngineError):
    """Instance ids match ^[A-Za-z0-9_][A-Za-z0-9_-]*$ and are at most 100 characters."""


class CheckedRowsChanged(EngineError):
    """The rows the caller checked before creating an instance changed first; nothing was
    written — check them again."""


class InstanceAlreadyExists(EngineError):
    """An instance with that id already exists; treat it as already processed."""

    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id
        super().__init__(
            f"instance {instance_id!r} already exists; a duplicate id means this work was already "
            "started — treat it as already processed, or pick another id"
        )


class InstanceNotFound(EngineError):
    """No instance has that id."""

    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id
        super().__init__(f"no instance has the id {instance_id!r}")


class InstanceFinished(EngineError):
    """The instance has finished; it takes no more events or control requests."""


class InvalidTransition(EngineError):
    """The instance is not in a status that allows this operation."""


class UnknownStep(EngineError):
    """The instance has no step with that name."""


class InvalidStepConfig(EngineError):
    """A step's configuration is invalid."""


class InvalidDuration(EngineError):
    """A duration could not be understood."""


class InvalidParams(EngineError):
    """Instance params must be a JSON object."""


class BatchTooLarge(EngineError):
    """create_batch takes at most 100 instances."""


class NonDeterministicReplay(EngineError):
    """Replay asked for a step that contradicts the recorded history."""


class VersionMismatch(NonDeterministicReplay):
    """Replay of an instance asked for a step its history contradicts, across a workflow version change."""

    def __init__(self, message: str, *, workflow: str, started_on: int, code_version: int) -> None:
        self.workflow, self.started_on, self.code_version = workflow, started_on, code_version
        super().__init__(message)


class VersionRetired(EngineError):
    """The workflow version is retired: its instances cannot run again."""


class VersionInUse(EngineError):
    """The workflow version still has instances that may run; it cannot be retired."""


class StepLimitExceeded(EngineError):
    """The instance asked for more steps than RUNLEDGER_MAX_STEPS allows."""


class StepResultTooLarge(EngineError):
    """A step returned more than 1 MiB."""


class StepResultNotSerializable(EngineError):
    """A step returned a value that is not JSON-serialisable."""


class StepTimeout(Exception):
    """A step attempt ran past its timeout."""


class WaitForEventTimeout(Exception):
    """`wait_for_event` reached its timeout before an event of the type arrived."""


class ChildWorkflowFailed(Exception):
    """A child workflow ended errored or terminated."""


class FanOutItemMissing(Exception):
    """A fan-out item had not finished when its fan-out timed out (the `error` of its Settled)."""


class FanOutItemFailed(EngineError):
    """Items of a packed fan-out carrier failed for good (the carrier's error and dead letter)."""


class StepFailed(Exception):
    """A step failed with an exception class that could not be rebuilt on replay."""

    def __init__(self, message: str = "", name: str = "Error") -> None:
        super().__init__(message)
        self.error_name = name


class BudgetExceeded(NonRetryableError):
    """A budget would be exceeded by this spend."""


class ApprovalError(EngineError):
    """The approval request cannot take this answer."""


class DeadLetterError(EngineError):
    """The dead letter cannot take this action."""


class InvalidSelection(EngineError):
    """A bulk action's selection is empty or not explicit; nothing was done."""


class BatchNotConfirmable(InvalidSelection):
    """The bulk action's preview cannot be confirmed any more (confirmed, stale or empty)."""


class WorkflowTimeout(EngineError):
    """The instance ran past its workflow's timeout."""

    def __init__(self, *, workflow: str, instance_id: str, timeout: float, started_at: str) -> None:
        self.workflow, self.instance_id, self.timeout = workflow, instance_id, timeout
        super().__init__(
            f"instance {instance_id} of workflow {workflow!r} ran past the workflow's timeout of "
            f"{_seconds(timeout)} (started {started_at}); it stopped at the next step boundary — "
            "raise the workflow's `timeout` or split the work into child workflows"
        )


def _seconds(value: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if value >= size and value % size == 0:
            count = int(value // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{value:g} seconds"


class CircuitOpen(Exception):
    """Raised inside a step when its outbound key's circuit breaker is open: the call was not made.

    Retryable: the engine's step retry waits at least `retry_after` seconds (the breaker's next
    probe), however short the step's own retry delay.
    """

    def __init__(self, key: str, retry_after: float, state: str = "open", *, probe_failed: str = "") -> None:
        self.key, self.retry_after, self.state = key, retry_after, state
        if probe_failed:
            # This step's call was the half-open breaker's probe: the provider is still down, which
            # is the breaker's finding, not this step's failure, so it counts against no retry
            # limit (a run that happens to probe every cool-down would otherwise die of the outage).
            super().__init__(
                f"circuit breaker {key!r}: this step's call was its probe and failed ({probe_failed}); it is "
                f"open again — the step retries in {retry_after:.1f} s, when the breaker lets a call through"
            )
            return
        why = "is open" if state == "open" else "is half-open and another call is probing it"
        super().__init__(
            f"circuit breaker {key!r} {why}; the call was not made — the step retries "
            f"in {retry_after:.1f} s, when the breaker lets a call through"
        )


class BreakerNotFound(EngineError):
    """No circuit breaker has that key."""


class PollDeadlineExceeded(Exception):
    """`step.poll` reached its deadline before its check said done; `last` is the last check's value."""

    def __init__(self, name: str, checks: int, deadline: str, last: object = None) -> None:
        self.name, self.checks, self.deadline, self.last = name, checks, deadline, last
        super().__init__(
            f"poll {name!r} was not done after {checks} check(s) by its deadline {deadline}; "
            "catch PollDeadlineExceeded to escalate, or give the poll a later deadline"
        )


class InvalidSearchAttributes(EngineError):
    """Search attributes are keys like `customer` with short text, number or boolean values."""


class InvalidConcurrencyLimit(EngineError):
    """A concurrency limit names a keyed workflow, a key value and a cap of at least 1."""

    def __init__(self, message: str | None = None, *, problems: dict[str, str] | None = None) -> None:
        self.problems = problems or {}  # field name -> what is wrong with it
        super().__init__(message)


class ConcurrencyLimitChanged(EngineError):
    """The concurrency limit changed since it was read; nothing was done — read it again."""


class ConcurrencyLimitNotFound(EngineError):
    """No concurrency limit is set for that workflow and key."""
